"""benchmarks/gpu_truth.py: the device check, proven here by its dry run (no GPU needed)."""

import importlib.util
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_truth.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_truth", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _truth(tmp_path, *args, timeout=400):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    document = json.loads((tmp_path / "truth.json").read_text()) if (tmp_path / "truth.json").exists() else None
    return done, document


def test_the_dry_run_goes_through_every_measuring_part(tmp_path):
    archive = tmp_path / "returned" / "truth.tar.gz"
    done, truth = _truth(tmp_path, "--only", "device,timers,vendor,static,baseline,plugin", "--archive", str(archive))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    parts = truth["parts"]
    assert {name: parts[name]["status"] for name in parts} == dict.fromkeys(
        ["device", "timers", "vendor", "static", "baseline", "plugin"], "done"
    )
    assert parts["device"]["results"]["machine_key"].startswith("cpu-")
    for kernel in ("vector_add", "softmax", "attention", "matmul_bf16"):
        row = parts["timers"]["results"][kernel]
        assert all(row[timer] > 0 for timer in ("cuda_event", "cuda_graph", "do_bench")), row
    assert any("ncu skipped" in note for note in parts["timers"]["notes"])
    vendor = parts["vendor"]["results"]
    assert vendor["softmax"]["max_abs_error_vs_theirs"] < 0.05
    assert vendor["softmax"]["ours_over_copy_bandwidth"] > 0
    assert {"matmul_bf16_64", "matmul_fp8_e4m3_64", "attention_causal", "rms_norm", "copy"} <= set(vendor)
    static = parts["static"]["results"]
    assert {key.split(":")[0] for key in static} == {"softmax", "rms_norm"}
    assert all(entry["static"]["registers"] > 0 and entry["loaded"] is None for entry in static.values())
    baseline = parts["baseline"]
    # (the saves pass; the comparison ran and judged, whatever a shared CPU's load made of its
    # microsecond timings: on the device a REGRESSED fails the part)
    assert baseline["exits"][:3] == [0, 0, 0] and baseline["exits"][3] in (0, 1)
    assert [path.startswith("baselines/main/") for path in baseline["files"]] == [True]
    assert baseline["verdicts"] and baseline["gate_passed"] == ("REGRESSED" not in baseline["verdicts"].values())
    plugin = parts["plugin"]
    assert plugin["exit"] == 0 and len(plugin["traces"]) == 3  # a trace per benchmark of the test
    assert "no GPU driver" in plugin["ncu"]["(first)"]["reason"]
    assert (tmp_path / "truth.log").read_text().count("done in") >= 6
    # The device returns 8 files at most: everything travels in one archive, the summary beside it.
    with tarfile.open(archive) as packed:
        names = set(packed.getnames())
    assert {"truth/truth.json", "truth/part-timers.json", "truth/baseline-compare.log", "truth/compare.json"} <= names
    assert json.loads((archive.parent / "truth.json").read_text()) == truth


def test_a_part_the_budget_cannot_fit_is_not_started_and_says_so(tmp_path):
    done, truth = _truth(tmp_path, "--budget", "1", "--only", "static", timeout=60)
    assert done.returncode == 0, done.stderr
    assert truth["parts"]["static"]["status"] == "not started"
    assert "static: not started" in done.stdout and "it needs 15 s" in done.stdout


def test_unknown_parts_are_refused_by_name(tmp_path):
    done, _ = _truth(tmp_path, "--only", "timers,bogus", timeout=60)
    assert done.returncode == 2
    assert "unknown parts ['bogus']" in done.stderr


NCU_HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)


def _ncu_row(kernel_id: int, name: str, unit: str, value: str) -> str:
    return (
        f'"{kernel_id}","1","python","h","{name}","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0",'
        f'"Command line profiler metrics","gpu__time_duration.sum","{unit}","{value}"'
    )


NCU_CSV = "\n".join(
    [
        "==PROF== Connected to process",
        NCU_HEADER,
        _ncu_row(0, "void at::native::vectorized_elementwise_kernel<4>", "nsecond", "5,000"),
        _ncu_row(1, "void at::native::vectorized_elementwise_kernel<4>", "nsecond", "7,000"),
        _ncu_row(2, "_matmul_kernel_tma_persistent", "usecond", "300"),
        _ncu_row(3, "_matmul_kernel_tma_persistent", "usecond", "500"),
        _ncu_row(4, "fill_kernel", "usecond", "1"),
    ]
)


def test_ncu_time_per_call_is_summed_by_kernel_name_and_unknown_kernels_are_kept_apart():
    per_call = _module().ncu_ms_per_call(
        NCU_CSV, {"vector_add": "elementwise", "matmul": "matmul", "softmax": "softmax"}, calls=2
    )
    assert per_call["vector_add"] == pytest.approx(0.006)
    assert per_call["matmul"] == pytest.approx(0.4)
    assert per_call["softmax"] is None
    assert per_call["other"] == pytest.approx(0.0005)


def test_ncu_counters_are_summarised_per_named_kernel_and_an_unseen_one_has_no_launches():
    from pytest_tesserabench.machine import profiling

    counters = _module().counters_by_kernel(
        profiling.parse_ncu_csv(NCU_CSV), {"matmul_bf16": "matmul", "attention": "attn"}
    )
    assert counters["matmul_bf16"]["launches"] == 2
    assert counters["matmul_bf16"]["gpu_time_ms"] == pytest.approx(0.8)
    assert counters["attention"]["launches"] == 0


def _baseline_part(tmp_path, monkeypatch, *, dry: bool, status: str) -> dict:
    """part_baseline with its four pytest runs faked: each "run" writes its --bench-json, the
    comparison's with one benchmark of ``status``, and exits as pytest would."""
    module = _module()

    def fake_run(truth, name, command, timeout, env):
        out = Path(next(arg.split("=", 1)[1] for arg in command if arg.startswith("--bench-json=")))
        verdict = {"status": status} if name == "baseline-compare" else None
        record = {"nodeid": "tests/bench/test_x.py::test_softmax", "name": None, "verdict": verdict}
        out.write_text(json.dumps({"benchmarks": {"softmax": record}}))
        return 1 if status == "REGRESSED" and name == "baseline-compare" else 0

    monkeypatch.setattr(module, "run_logged", fake_run)
    truth = module.Truth(tmp_path, dry=dry, budget=60)
    return module.part_baseline(truth, 60, env={})


@pytest.mark.parametrize("dry", [False, True])
def test_the_baseline_part_passes_a_comparison_that_calls_nothing_regressed(tmp_path, monkeypatch, dry):
    entry = _baseline_part(tmp_path, monkeypatch, dry=dry, status="UNCHANGED")
    assert entry["status"] == "done" and entry["gate_passed"]
    assert entry["verdicts"] == {"tests/bench/test_x.py::test_softmax": "UNCHANGED"}


def test_a_regressed_verdict_fails_the_baseline_part_on_the_device_but_not_in_the_dry_run(tmp_path, monkeypatch):
    # On the device a REGRESSED of unchanged code is the gate failing; the dry run times CPU
    # stand-ins beside other jobs, where it proves only that the saves and the comparison ran.
    device = _baseline_part(tmp_path / "device", monkeypatch, dry=False, status="REGRESSED")
    assert device["status"] == "failed" and not device["gate_passed"]
    dry = _baseline_part(tmp_path / "dry", monkeypatch, dry=True, status="REGRESSED")
    assert dry["status"] == "done" and not dry["gate_passed"]
