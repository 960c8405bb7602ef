"""`tesserabench tune`: static runs without a GPU, --show, and one clear line for bad input."""

import json

import pytest
from tuning_kernels import ROWMAX

from pytest_tesserabench.cli import main
from pytest_tesserabench.tuning.cache import TuningCache, kernel_source_hash

KERNELS = "tests/tuning/tuning_kernels.py"


@pytest.fixture
def tune(analysis_cache, tmp_path, capsys):
    """Run `tesserabench tune ARGS` with a private tuning cache; (status, stdout, stderr)."""

    def run(*args):
        status = main(["tune", *args, "--analysis-cache", str(analysis_cache), "--cache", str(tmp_path / "c.json")])
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return run


def test_without_a_gpu_configs_are_pruned_and_ranked_by_a_stated_estimate(tune, tmp_path):
    status, out, err = tune(f"{KERNELS}:ROWMAX", "--arch", "sm_80", "--min-occupancy", "75%", "--json", "-")
    assert status == 0, err
    assert "no GPU here: sm_80 configs are pruned and RANKED BY A STATIC ESTIMATE, not measured" in out
    assert "--strategy" not in out  # (the default: nothing to say)
    assert "ESTIMATE, not a measurement (no GPU timed these; wave-quantised tile roofline on a NVIDIA A100" in out
    assert "static pruning for sm_80: 1 of 6 configs kept" in out
    assert "1. BLOCK=256 num_warps=4  est " in out
    document = json.loads(out[out.index("[\n") :])
    assert document[0]["method"] == "static-estimate" and document[0]["best"] == {"BLOCK": 256, "num_warps": 4}
    assert document[0]["prune"]["rules"]["compile"]["removed"] == 2
    assert not (tmp_path / "c.json").exists()  # an estimate is never cached


def test_nothing_left_after_pruning_exits_1_for_ci(tune):
    status, out, err = tune(f"{KERNELS}:BROKEN", "--arch", "sm_80")
    assert status == 1
    assert err.strip().splitlines() == [
        "tesserabench tune: broken n=1048576 fp32 on sm_80: static pruning removed all 2 configs (compile 2); "
        "e.g. BLOCK=48 num_warps=4: CompilationError: arange's range must be a power of 2. No config compiles "
        "for this problem: a shape or dtype the kernel cannot take (the error says which), or the kernel itself "
        "(`tesserabench inspect` shows the whole error)"
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        ((), "name the tunable (e.g. tesserabench tune kernels.matmul:TUNABLE) or pass --show"),
        (("no_such_module:TUNABLE",), "cannot import 'no_such_module'"),
        ((f"{KERNELS}:rowmax_config",), "is a function, not a pytest_tesserabench.tuning.Tunable"),
        ((f"{KERNELS}:NOPE",), "has no 'NOPE'; its Tunables: BROKEN, CONTRADICTORY, RING_DOT, ROWMAX"),
        ((f"{KERNELS}:ROWMAX", "--shape", "n=lots"), "--shape n='lots': not an integer"),
        ((f"{KERNELS}:ROWMAX", "--shape", "m=4"), "rowmax takes the sizes n; missing n; unknown m"),
        ((f"{KERNELS}:ROWMAX", "--dtype", "fp16"), "rowmax is tuned for the dtypes fp32; got fp16"),
        ((f"{KERNELS}:ROWMAX", "--arch", "sm_75"), "unknown GPU architecture 'sm_75'"),
        ((f"{KERNELS}:ROWMAX", "--no-prune"), "--no-prune needs a GPU of the target architecture"),
        (
            (f"{KERNELS}:CONTRADICTORY", "--arch", "sm_80"),
            "contradictory n=1048576 fp32 on sm_80: the constraints reject all 2 configs of the space (contradictory): "
            "'BLOCK > n' rejected 2; loosen or remove one of them",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tune, args, message):
    status, out, err = tune(*args)
    assert status == 2
    (line,) = err.strip().splitlines()
    assert line.startswith("tesserabench tune: error: ") and message in line


def test_argparse_errors_exit_2(capsys):
    assert main(["tune", "x:Y", "--budget", "0"]) == 2
    assert "budget '0': give a number of configs to time (40) or a share of the candidates (25%)" in (
        capsys.readouterr().err
    )


def test_show_lists_entries_and_marks_stale_ones(tmp_path, capsys):
    path = tmp_path / "c.json"
    assert main(["tune", "--show", "--cache", str(path)]) == 0
    assert "no tuned configs (no such file yet)" in capsys.readouterr().out
    current = kernel_source_hash(ROWMAX.kernel())
    for source_hash, n in ((current, 1024), ("0123456789ab", 2048)):
        TuningCache(path).record(
            {
                "kernel": "rowmax",
                "tunable": f"{KERNELS}:ROWMAX",
                "source_hash": source_hash,
                "bucket": {"n": n},
                "dtypes": ["fp32"],
                "arch": "sm_90",
                "triton": "3.6.0",
                "config": {"BLOCK": 256, "num_warps": 4},
                "median_ms": 0.0123,
                "method": "measured",
                "strategy": "bayesian",
                "timed": 12,
                "device": "NVIDIA H100 80GB HBM3",
                "tuned_at": "2026-11-22T10:00:00Z",
            }
        )
    # Recording the second hash dropped the first (one source per kernel): record it back by hand.
    data = json.loads(path.read_text())
    (stale_key,) = data["entries"]
    current_entry = {**data["entries"][stale_key], "source_hash": current, "bucket": {"n": 1024}}
    data["entries"][f"rowmax fp32 n=1024 sm_90 triton-3.6.0 src-{current}"] = current_entry
    path.write_text(json.dumps(data))
    assert main(["tune", "--show", "--cache", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}: 2 tuned configs" in out
    assert "BLOCK=256 num_warps=4  12.3 µs  measured (bayesian, 12 timed) on NVIDIA H100 80GB HBM3" in out
    assert "source current" in out and "source STALE (kernel source changed)" in out


def test_show_warns_about_a_corrupt_cache(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text("{")
    assert main(["tune", "--show", "--cache", str(path)]) == 0
    captured = capsys.readouterr()
    assert "no tuned configs" in captured.out
    assert "tesserabench tune: warning: " in captured.err and "not valid JSON" in captured.err


def test_the_command_lists_tune():
    from pytest_tesserabench.cli import build_parser

    assert "tune" in build_parser().format_help()


def test_on_a_gpu_the_winner_is_timed_and_cached(tmp_path, monkeypatch, capsys):
    """The command's GPU path, with a fake GPU: timers from fakes.FakeGpu, sm_80 as the live GPU."""
    from fakes import FAST_BUDGET, FakeGpu, landscape_ms

    from pytest_tesserabench.tuning import cli as tune_cli
    from pytest_tesserabench.tuning import measure

    gpu = FakeGpu(landscape_ms)
    monkeypatch.setattr(tune_cli, "_live_gpu", lambda: ("sm_80", "Fake GPU"))
    monkeypatch.setattr(measure, "gpu_timer_factory", lambda runner, device: gpu.timer)
    monkeypatch.setattr(measure, "TUNING_BUDGET", FAST_BUDGET)
    cache = tmp_path / "c.json"
    args = ["tune", "tests/tuning/fakes.py:LANDSCAPE_GPU", "--no-prune", "--strategy", "random", "--budget", "50%"]
    assert main([*args, "--arch", "sm_80", "--cache", str(cache)]) == 0
    out = capsys.readouterr().out
    assert "random search: timed 132 of 264 candidates (0 failed to run)" in out
    assert "significantly" in out and f"cached in {cache} as 'landscape fp16 n=1024 sm_80 triton-" in out
    (entry,) = TuningCache(cache).load().values()
    assert entry["method"] == "measured" and entry["device"] == "Fake GPU" and entry["timed"] == 132
    assert entry["config"] == min((t for t in gpu.launched), key=landscape_ms).to_json()
    # Another target than the live GPU is only estimated, and says so; --no-prune cannot apply there.
    assert main([*args, "--arch", "sm_90", "--cache", str(cache)]) == 2
    assert "--no-prune needs a GPU of the target architecture" in capsys.readouterr().err


def test_an_unwritable_json_path_is_refused_before_any_work(tmp_path, capsys):
    folder = tmp_path / "results"
    folder.mkdir()
    assert main(["tune", f"{KERNELS}:ROWMAX", "--json", str(folder)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"tesserabench tune: error: --json {folder} is a directory; give a file path like {folder / 'results.json'}"
    )


def test_a_search_strategy_without_a_gpu_is_said_to_be_unused(tune):
    status, out, err = tune(f"{KERNELS}:ROWMAX", "--arch", "sm_80", "--strategy", "random", "--min-occupancy", "75%")
    assert status == 0, err
    assert "(--strategy random and --budget choose what is timed: not used there)" in out
