"""The machine a benchmark ran on and what else it was doing: the device and its fingerprint
(``device``: the baseline key), other processes' CPU (``neighbours``) and the timing thread's
wait for a CPU (``run_queue``), library thread pools (``threads``), NVML telemetry
(``telemetry``), Nsight profiling and traces (``profiling``), peaks and the roofline
(``roofline``), one GPU per xdist worker (``worker_gpus``), the ranks that measure together
(``ranks``), and Triton's interpreter where there is no GPU (``interpret``). It imports the
record only.
"""
