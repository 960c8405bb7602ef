"""One GPU per pytest-xdist worker, with a measurement lock per GPU; nothing changes with one GPU.

No GPU is needed: the GPUs a process may use are read from CUDA_VISIBLE_DEVICES or from the
driver's /proc folder (faked here), never by starting CUDA.
"""

import json

import pytest

from pytest_tesserabench import worker_gpus


def test_gpus_from_cuda_visible_devices_stop_at_an_invalid_entry():
    assert worker_gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "2, 3,GPU-9f1c"}) == ["2", "3", "GPU-9f1c"]
    assert worker_gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "0,-1,2"}) == ["0"]
    assert worker_gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []


def test_gpus_from_the_driver(tmp_path):
    for bus in ("0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0"):
        (tmp_path / bus).mkdir()
    assert worker_gpus.visible_gpus({}, proc_dir=tmp_path) == ["0", "1", "2", "3"]
    assert worker_gpus.visible_gpus({}, proc_dir=tmp_path / "absent") == []


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"PYTEST_XDIST_WORKER": "gw0", "CUDA_VISIBLE_DEVICES": "4,5,6,7"}, "4"),
        ({"PYTEST_XDIST_WORKER": "gw3", "CUDA_VISIBLE_DEVICES": "4,5,6,7"}, "7"),
        ({"PYTEST_XDIST_WORKER": "gw5", "CUDA_VISIBLE_DEVICES": "4,5,6,7"}, "5"),  # workers share round-robin
        ({"PYTEST_XDIST_WORKER": "gw1", "CUDA_VISIBLE_DEVICES": "0"}, None),  # one GPU: as before
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, None),  # not an xdist worker
        ({"PYTEST_XDIST_WORKER": "gw1", "CUDA_VISIBLE_DEVICES": "0,1", "off": True}, None),
    ],
)
def test_each_worker_gets_its_own_gpu(env, expected):
    env = dict(env)
    mode = "off" if env.pop("off", False) else "auto"
    before = env.get("CUDA_VISIBLE_DEVICES")
    assert worker_gpus.pin_worker(env, mode, proc_dir=worker_gpus.PROC_GPUS) == expected
    assert env.get("CUDA_VISIBLE_DEVICES") == (expected if expected is not None else before)


def test_lock_per_gpu_and_per_machine():
    assert worker_gpus.lock_name(None) == "tesserabench-measure.lock"
    assert worker_gpus.lock_name("3") == "tesserabench-measure-gpu-3.lock"
    assert worker_gpus.lock_name("GPU-9f1c/../x") == "tesserabench-measure-gpu-GPU-9f1c-..-x.lock"


def test_xdist_workers_each_see_one_gpu_and_lock_only_it(pytester, fast, tmp_path, monkeypatch):
    """End to end under pytest -n 2 with two (pretend) GPUs: CUDA_VISIBLE_DEVICES is set in each
    worker before any test module runs, and each worker measures under its own GPU's lock."""
    locks = tmp_path / "locks"
    locks.mkdir()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    monkeypatch.setenv("TMPDIR", str(locks))  # where the workers' measurement locks go
    out = tmp_path / "seen.json"
    pytester.makeconftest(f"""
        import json, os
        SEEN_AT_IMPORT = os.environ.get("CUDA_VISIBLE_DEVICES")
        def pytest_sessionfinish(session):
            worker = os.environ.get("PYTEST_XDIST_WORKER")
            if worker:
                with open({str(out)!r} + "." + worker, "w") as f:
                    json.dump({{"at_import": SEEN_AT_IMPORT}}, f)
    """)
    pytester.makepyfile("""
        import pytest
        @pytest.mark.parametrize("i", range(4))
        def test_a(bench, i):
            bench(sum, range(100))
    """)
    result = pytester.runpytest("-n", "2", "--bench", *fast)
    result.assert_outcomes(passed=4)
    seen = sorted(json.loads((tmp_path / f"seen.json.gw{i}").read_text())["at_import"] for i in (0, 1))
    assert seen == ["3", "5"]
    assert {p.name for p in locks.iterdir()} >= {"tesserabench-measure-gpu-3.lock", "tesserabench-measure-gpu-5.lock"}
    assert not (locks / "tesserabench-measure.lock").exists()


def test_with_one_gpu_the_machine_lock_stays(pytester, fast, tmp_path, monkeypatch):
    locks = tmp_path / "locks"
    locks.mkdir()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("TMPDIR", str(locks))
    pytester.makepyfile("""
        import os
        def test_a(bench):
            assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"
            bench(sum, range(100))
    """)
    pytester.runpytest("-n", "2", "--bench", *fast).assert_outcomes(passed=1)
    assert [p.name for p in locks.iterdir() if p.suffix == ".lock"] == ["tesserabench-measure.lock"]
