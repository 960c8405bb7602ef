"""Kernel figures against the baseline's: matched by kernel, arch and config; severity by damage."""

from pytest_tesserabench.gate.kernels import compare_kernels, describe_change


def kernel(**fields):
    base = {
        "name": "k",
        "arch": "sm_90",
        "constexprs": {"BLOCK": 128},
        "num_warps": 4,
        "num_stages": 3,
        "registers": 64,
        "spill_bytes": 0,
        "shared_bytes": 16384,
        "occupancy": 0.5,
        "notes": [],
    }
    base.update(fields)
    return base


def test_same_config_more_spills_and_less_occupancy_regress_with_severity():
    found = compare_kernels([kernel(spill_bytes=64, occupancy=0.25)], [kernel()])
    assert found.regressions == [
        ("moderate", "kernel k (sm_90): spills 0 B -> 64 B"),
        ("moderate", "kernel k (sm_90): occupancy 0.50 -> 0.25"),
    ]
    assert found.severity == "moderate"
    assert compare_kernels([kernel(occupancy=0.45)], [kernel()]).regressions == [
        ("mild", "kernel k (sm_90): occupancy 0.50 -> 0.45")
    ]


def test_register_and_shared_memory_changes_are_notes():
    found = compare_kernels([kernel(registers=96, shared_bytes=32768)], [kernel()])
    assert found.regressions == []
    assert found.notes == ["kernel k (sm_90): registers 64 -> 96", "kernel k (sm_90): shared_bytes 16384 B -> 32768 B"]


def test_the_work_a_kernel_holds_is_noted_where_it_changed_never_failed():
    # a second accumulator (two dots), wasteful math (more SASS, SFU calls): no GPU times them
    old = kernel(sass_instructions=98, tensor_core_instructions=2, ttir={"dot": 1, "math": 1}, instructions={"sfu": 2})
    new = kernel(sass_instructions=108, tensor_core_instructions=4, ttir={"dot": 2, "math": 1}, instructions={"sfu": 4})
    found = compare_kernels([new], [old])
    assert found.regressions == []
    assert found.notes == [
        "kernel k (sm_90): work SASS instructions 98 -> 108 (+10.2%), tensor-core instructions 2 -> 4, "
        "TTIR dot 1 -> 2, PTX sfu 2 -> 4"
    ]
    assert compare_kernels([old], [old]).notes == []  # nothing changed: nothing said


def test_more_sass_instructions_fail_past_the_work_threshold_by_their_growth():
    old, new = kernel(sass_instructions=200), kernel(sass_instructions=450)
    assert compare_kernels([new], [old]).regressions == []  # off by default: a note
    found = compare_kernels([new], [old], work_threshold=0.2)
    assert found.regressions == [
        ("severe", "kernel k (sm_90): SASS instructions 200 -> 450 (+125.0%), past --bench-work-threshold")
    ]
    assert compare_kernels([kernel(sass_instructions=215)], [old], work_threshold=0.05).severity == "mild"
    assert compare_kernels([kernel(sass_instructions=209)], [old], work_threshold=0.05).regressions == []
    # another Triton compiled the baseline: the growth is shown, not gated
    other = compare_kernels([new], [old], work_threshold=0.2, compilers_differ="Triton 3.6.0 -> 3.9.0")
    assert other.regressions == [] and any("past --bench-work-threshold" in n for n in other.notes)


def test_a_baseline_keeps_the_work_figures_and_no_more_of_the_mix():
    from pytest_tesserabench.record.results import BenchRecord, RunDocument

    analysed = kernel(
        sass_instructions=98,
        ttir={"dot": 1, "load": 2, "store": 1, "math": 3, "operations": 40},
        instructions={"sfu": 2, "total": 120},
        compile_ms={"ttir": 5.0},
    )
    record = BenchRecord("t.py::k", None, "t.py::k", "interpreter", [1.0], None, kernels=[analysed])
    (kept,) = RunDocument(benchmarks={"t.py::k": record}).for_baseline().benchmarks["t.py::k"].kernels
    assert kept["sass_instructions"] == 98 and kept["ttir"] == {"dot": 1, "load": 2, "store": 1, "math": 3}
    assert kept["instructions"] == {"sfu": 2} and "compile_ms" not in kept
    # ... so that the gate can say what changed against a saved baseline
    changed = dict(analysed, ttir={**analysed["ttir"], "dot": 2})
    assert compare_kernels([changed], [kept]).notes == ["kernel k (sm_90): work TTIR dot 1 -> 2"]


def test_another_config_is_said_as_such_and_not_gated_by_its_figures():
    found = compare_kernels([kernel(constexprs={"BLOCK": 64}, num_warps=8, occupancy=0.25, spill_bytes=8)], [kernel()])
    assert found.regressions == []
    assert found.notes[0] == "kernel k (sm_90): config changed: BLOCK 128 -> 64, num_warps 4 -> 8"
    assert "kernel k (sm_90): occupancy 0.50 -> 0.25" in found.notes


def test_a_config_that_can_no_longer_launch_is_severe_and_says_why():
    why = "296960 bytes of shared memory exceed the 232448 per block on sm_90"
    found = compare_kernels([kernel(constexprs={"BLOCK": 512}, occupancy=0.0, notes=[why])], [kernel()])
    assert found.regressions == [("severe", f"kernel k (sm_90): can no longer launch (occupancy 0): {why}")]
    same = compare_kernels([kernel(occupancy=0.0, notes=[why])], [kernel()])
    assert same.severity == "severe"
    # Already unlaunchable in the baseline: a fact, not a change.
    assert compare_kernels([kernel(occupancy=0.0)], [kernel(occupancy=0.0)]).regressions == []


def test_a_kernel_that_no_longer_compiles_is_severe():
    found = compare_kernels([kernel(error="ptxas fatal : Entry function uses too much shared data")], [kernel()])
    assert found.regressions == [
        ("severe", "kernel k (sm_90): no longer compiles: ptxas fatal : Entry function uses too much shared data")
    ]


def test_other_archs_and_new_kernels_are_not_compared():
    assert compare_kernels([kernel(arch="sm_80", spill_bytes=64)], [kernel()]).regressions == []
    assert compare_kernels([kernel(name="new", spill_bytes=64)], [kernel()]).regressions == []


def test_another_triton_shows_figures_but_gates_nothing():
    found = compare_kernels(
        [kernel(spill_bytes=64, occupancy=0.0)], [kernel()], compilers_differ="Triton 3.6.0 in the baseline, 3.9.0 here"
    )
    assert found.regressions == []
    assert found.notes[0] == "kernel figures compared, not gated: Triton 3.6.0 in the baseline, 3.9.0 here"
    assert any("can no longer launch" in note for note in found.notes)


def test_describe_change():
    assert describe_change({"A": 1, "B": 2}, {"A": 1, "B": 3, "C": 4}) == "B 2 -> 3, C - -> 4"
