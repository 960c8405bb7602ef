"""Bus-bandwidth factors as nccl-tests defines them (doc/PERFORMANCE.md, "Summary"; src/*.cu
*GetBw: busbw = algbw * factor(n)), written here independently of pytest_tesserabench."""

FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}
