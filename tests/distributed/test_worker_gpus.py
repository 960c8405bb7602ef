"""One GPU per pytest-xdist worker, with a measurement lock per GPU; nothing changes with one GPU.

No GPU is needed: the GPUs a process may use are read from CUDA_VISIBLE_DEVICES or from the
driver's /proc folder (faked here), never by starting CUDA.
"""

import json

import execnet

from pytest_tesserabench.machine import worker_gpus


def test_gpus_from_cuda_visible_devices_stop_at_an_invalid_entry():
    assert worker_gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "2, 3,GPU-9f1c"}) == ["2", "3", "GPU-9f1c"]
    assert worker_gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "0,-1,2"}) == ["0"]
    assert worker_gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []


def test_gpus_from_the_driver(tmp_path):
    for bus in ("0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0"):
        (tmp_path / bus).mkdir()
    assert worker_gpus.visible_gpus({}, proc_dir=tmp_path) == ["0", "1", "2", "3"]
    assert worker_gpus.visible_gpus({}, proc_dir=tmp_path / "absent") == []


def _specs(*texts):
    specs = [execnet.XSpec(text) for text in texts]
    for i, spec in enumerate(specs):
        spec.id = f"gw{i}"
    return specs


def test_each_local_worker_gets_its_own_gpu_round_robin():
    specs = _specs("popen", "popen", "popen", "popen", "popen")
    given = worker_gpus.assign(specs, {"CUDA_VISIBLE_DEVICES": "4,5,6,7"})
    assert given == {"gw0": "4", "gw1": "5", "gw2": "6", "gw3": "7", "gw4": "4"}
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in specs] == ["4", "5", "6", "7", "4"]


def test_one_gpu_off_remote_workers_and_users_own_choice_are_left_alone():
    assert worker_gpus.assign(_specs("popen", "popen"), {"CUDA_VISIBLE_DEVICES": "0"}) == {}
    assert worker_gpus.assign(_specs("popen", "popen"), {"CUDA_VISIBLE_DEVICES": "0,1"}, mode="off") == {}
    specs = _specs("ssh=gpu-box//python=python3", "popen//env:CUDA_VISIBLE_DEVICES=1", "popen")
    assert worker_gpus.assign(specs, {"CUDA_VISIBLE_DEVICES": "0,1"}) == {"gw2": "0"}
    assert specs[1].env["CUDA_VISIBLE_DEVICES"] == "1" and "CUDA_VISIBLE_DEVICES" not in specs[0].env


def test_lock_per_gpu_and_per_machine():
    assert worker_gpus.lock_name(None) == "tesserabench-measure.lock"
    assert worker_gpus.lock_name("3") == "tesserabench-measure-gpu-3.lock"
    assert worker_gpus.lock_name("GPU-9f1c/../x") == "tesserabench-measure-gpu-GPU-9f1c-..-x.lock"


def test_xdist_workers_each_see_one_gpu_and_lock_only_it(pytester, fast, tmp_path, monkeypatch):
    """End to end under pytest -n 2 with two (pretend) GPUs: each worker starts with its own
    CUDA_VISIBLE_DEVICES (seen by its conftest at import) and measures under its own GPU's lock."""
    locks = tmp_path / "locks"
    locks.mkdir()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    monkeypatch.setenv("TMPDIR", str(locks))  # where the workers' measurement locks go
    out = tmp_path / "seen.json"
    pytester.makeconftest(f"""
        import json, os
        SEEN_AT_IMPORT = os.environ.get("CUDA_VISIBLE_DEVICES")
        def pytest_sessionfinish(session):
            if hasattr(session.config, "workerinput"):  # a worker of this run (not an outer run's)
                worker = session.config.workerinput["workerid"]
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
