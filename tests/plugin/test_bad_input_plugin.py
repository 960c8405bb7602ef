"""Bad input through the plugin: one clear line each, before measuring where possible; nothing
lost (other tests' results, the baseline), nothing hangs."""

import json
import re

import pytest

from pytest_tesserabench.machine import device as machine
from pytest_tesserabench.record import files

TESTS = """
def test_one(bench):
    bench(sum, [1, 2])

def test_bad_extra(bench):
    bench(sum, [3])
    bench.extra_info["when"] = object()  # not JSON

def test_two(bench):
    bench(sum, [4, 5])
"""


def key_file(pytester, name="main"):
    return pytester.path / "baselines" / name / f"{machine.machine_key()}.json"


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_extra_info_that_is_not_json_fails_its_test_only(pytester, fast, tmp_path, workers):
    pytester.makepyfile(test_x=TESTS)
    out = tmp_path / "run.json"
    result = pytester.runpytest("--bench-save=main", f"--bench-json={out}", *fast, *workers)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_x.py::test_bad_extra: bench.extra_info.when: is <object object at *> of type object, "
            "which JSON cannot hold; store numbers, strings, lists or dicts of them"
        ]
    )
    assert sorted(json.loads(out.read_text())["benchmarks"]) == ["test_x.py::test_one", "test_x.py::test_two"]
    saved = json.loads(key_file(pytester).read_text())["runs"][0]["benchmarks"]
    assert sorted(saved) == ["test_x.py::test_one", "test_x.py::test_two"]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_extra_info_replaced_by_a_non_dict_fails_its_test_only(pytester, fast, tmp_path, workers):
    tests = TESTS.replace('bench.extra_info["when"] = object()  # not JSON', 'bench.extra_info = "oops"')
    tests += "\ndef test_new_dict(bench):\n    bench(sum, [6])\n    bench.extra_info = {'note': 'late'}\n"
    pytester.makepyfile(test_x=tests)
    out = tmp_path / "run.json"
    result = pytester.runpytest(f"--bench-json={out}", *fast, *workers)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*bench.extra_info = 'oops': extra_info is a dict; set keys on it instead*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    saved = json.loads(out.read_text())["benchmarks"]
    assert sorted(saved) == [f"test_x.py::test_{name}" for name in ("bad_extra", "new_dict", "one", "two")]
    assert saved["test_x.py::test_bad_extra"]["outcome"] == "failed"  # measured before the assignment: kept
    assert saved["test_x.py::test_new_dict"]["extra_info"] == {"note": "late"}  # assigned after bench(): kept


def test_a_failed_test_leaves_its_own_history_as_it_was(pytester, fast):
    # Its record is left out of the save; its earlier runs stay, however many runs of the others
    # come after (bench_history counts per benchmark: trimmed by run count, they were lost).
    green = TESTS.replace('bench.extra_info["when"] = object()  # not JSON', "pass")
    pytester.makepyfile(test_x=green)
    assert pytester.runpytest("--bench-save=main", "-o", "bench_history=1", *fast).ret == pytest.ExitCode.OK
    pytester.makepyfile(test_x=green.replace("    pass", "    assert False"))
    for _ in range(2):
        result = pytester.runpytest("--bench-save=main", "-o", "bench_history=1", *fast)
        result.assert_outcomes(passed=2, failed=1)
        result.stdout.fnmatch_lines(["*saved 2 benchmark(s) to * (1 from failed tests left out)"])
    runs = json.loads(key_file(pytester).read_text())["runs"]
    assert [sorted(run["benchmarks"]) for run in runs] == [
        ["test_x.py::test_bad_extra", "test_x.py::test_one", "test_x.py::test_two"],
        ["test_x.py::test_one", "test_x.py::test_two"],
    ]


def test_an_interrupted_run_saves_nothing(pytester, fast):
    pytester.makepyfile(
        test_x="""
        def test_one(bench):
            bench(sum, [1])
        def test_stop():
            raise KeyboardInterrupt
        """
    )
    result = pytester.runpytest_subprocess("--bench-save=main", *fast)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*nothing saved to baseline main: the run was interrupted*"])
    assert not key_file(pytester).exists()


def test_a_bench_dir_that_is_a_file_is_refused_before_measuring(pytester, tmp_path):
    pytester.makepyfile(test_x="def test_one(bench):\n    raise AssertionError('measured')\n")
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    result = pytester.runpytest("--bench-save=main", f"--bench-dir={not_a_dir}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: baselines folder {not_a_dir}/main (command line): {not_a_dir} is a file, not a folder"]
    )


def test_a_full_disk_is_found_before_measuring(pytester, monkeypatch):
    pytester.makepyfile(test_x="def test_one(bench):\n    raise AssertionError('measured')\n")
    monkeypatch.setattr(files, "_probe_write", lambda folder: "No space left on device")
    for option in ("--bench-save=main", "--bench-json=out.json"):
        result = pytester.runpytest(option)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["ERROR: *cannot write in *: No space left on device"])


def test_bench_json_alone_measures(pytester, fast, tmp_path):
    pytester.makepyfile(test_x="def test_one(bench):\n    bench(sum, [1])\n")
    out = tmp_path / "run.json"
    pytester.runpytest(f"--bench-json={out}", *fast).assert_outcomes(passed=1)
    assert list(json.loads(out.read_text())["benchmarks"]) == ["test_x.py::test_one"]


def test_bench_json_in_the_ini_file_does_not_turn_measuring_on(pytester):
    pytester.makeini("[pytest]\nbench_json = run.json\n")
    pytester.makepyfile(test_x="def test_one(bench):\n    assert not bench.enabled\n")
    pytester.runpytest().assert_outcomes(passed=1)
    assert not (pytester.path / "run.json").exists()


@pytest.mark.parametrize("path", ["/dev/stdout", "/dev/fd/1", "link-to-stdout.json"])
def test_bench_json_to_stdout_writes_through(pytester, fast, path):
    # pytester's subprocess writes its stdout to a file, as `pytest ... > log.txt` in a CI job
    # does: the JSON goes into that file after what pytest printed, never in place of it.
    (pytester.path / "link-to-stdout.json").symlink_to("/dev/stdout")
    pytester.makepyfile(test_x="def test_one(bench):\n    bench(sum, [1])\n")
    result = pytester.runpytest_subprocess(f"--bench-json={path}", *fast)
    assert result.ret == pytest.ExitCode.OK
    out = result.stdout.str()
    assert '"test_x.py::test_one": {' in out
    assert out.index("test session starts") < out.index('"schema": 1') < out.index("1 passed")
    assert re.search(r"^\{$", out, re.M)  # the JSON begins on a line of its own, not after the progress


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"schema": 1}'.encode("utf-16"), "is encoded as UTF-16; JSON files here are UTF-8*iconv*"),
        (b"[" * 50000, "is nested too deeply*"),
        (
            b'{"schema": 1, "machine_key": "KEY", "runs": '
            b'[{"benchmarks": {"t": {"timer": "cpu", "rounds_ms": ["x"]}}}]}',
            "*rounds_ms[[]0[]]: is str 'x'*",
        ),
        (
            b'{"schema": 1, "machine_key": "KEY", "runs": '
            b'[{"benchmarks": {"t": {"timer": "cpu", "rounds_ms": [1' + b"0" * 400 + b"]}}}]}",
            "*rounds_ms[[]0[]]: is 1000*, too large for any number here*",
        ),
        (b'{"schema": 1, "machine_key": "a/b", "runs": []}', "*'machine_key' 'a/b' is not a machine key*"),
    ],
)
def test_a_bad_baseline_is_one_usage_error_line(pytester, content, message):
    pytester.makepyfile(test_x="def test_one(bench):\n    bench(sum, [1])\n")
    path = key_file(pytester)
    path.parent.mkdir(parents=True)
    path.write_bytes(content.replace(b"KEY", machine.machine_key().encode()))
    for option in ("--bench-compare=main", "--bench-save=main"):
        result = pytester.runpytest(option)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: {path}*{message}"])
        assert "Traceback" not in result.stderr.str()


def test_another_users_measurement_lock_falls_back_to_a_per_user_lock(monkeypatch, tmp_path):
    import filelock

    from pytest_tesserabench.measure.instruments import Instruments
    from pytest_tesserabench.options import Settings

    instruments = Instruments(Settings(), cache_dir=None, machine_info=dict)
    shared = tmp_path / "tesserabench-measure.lock"
    shared.write_text("")
    instruments._lock_path = shared
    real_acquire = filelock.FileLock.acquire

    def acquire(self, *args, **kwargs):
        if self.lock_file == str(shared):
            raise PermissionError(13, "Permission denied", str(shared))
        return real_acquire(self, *args, **kwargs)

    monkeypatch.setattr(filelock.FileLock, "acquire", acquire)
    with pytest.warns(UserWarning, match="not writable by this user; measuring under .*tesserabench-measure-"):
        with instruments.device_lock():
            pass
    with instruments.device_lock():  # the fallback sticks: no second warning
        pass
