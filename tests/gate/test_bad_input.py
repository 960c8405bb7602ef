"""Bad files and odd paths: one clear error naming the file and the fix; nothing lost, nothing hangs."""

import json
import os
import stat
import threading

import pytest

from pytest_tesserabench.cli import main
from pytest_tesserabench.history.baseline import BaselineError, baseline_path, load_baseline, load_runs, save_run
from pytest_tesserabench.record import files
from pytest_tesserabench.record.results import RunDocument

KEY = "cpu-x86-64-test"
GOOD_RUN = {
    "schema": 1,
    "machine": {"python": "3.11"},
    "started": "t0",
    "canary_ms": [1.0],
    "benchmarks": {"t::a": {"timer": "cpu", "rounds_ms": [1.0, 1.1, 0.9]}},
}


def write_baseline(tmp_path, content) -> object:
    path = baseline_path(tmp_path, "main", KEY)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def baseline_with(record_fields=None, **run_fields):
    run = json.loads(json.dumps(GOOD_RUN))
    run["benchmarks"]["t::a"].update(record_fields or {})
    run.update(run_fields)
    return {"schema": 1, "name": "main", "machine_key": KEY, "runs": [run]}


def summary(**fields):
    """A record's stats block: consistent, except for ``fields``."""
    stats = {"median_ms": 1.0, "ci95_ms": [0.9, 1.1], "mean_ms": 1.0, "min_ms": 0.9, "max_ms": 1.1}
    stats.update({"iqr_ms": 0.1, "stdev_ms": 0.1, "rounds": 3})
    return {**stats, **fields}


def refused(tmp_path, content, message):
    path = write_baseline(tmp_path, content)
    before = path.read_bytes()
    with pytest.raises(BaselineError, match=message) as info:
        load_baseline(path, machine_key=KEY)
    assert str(path) in str(info.value)
    with pytest.raises(BaselineError):
        save_run(tmp_path, "main", KEY, RunDocument.from_json(GOOD_RUN))
    assert path.read_bytes() == before
    return str(info.value)


def test_utf16_and_other_encodings_are_named_with_the_fix(tmp_path):
    text = json.dumps(baseline_with())
    assert "iconv -f UTF-16 -t UTF-8" in refused(tmp_path, text.encode("utf-16"), "encoded as UTF-16")
    refused(tmp_path, text.encode("utf-32"), "encoded as UTF-32")
    refused(tmp_path, b'{"schema": 1, "name": "\xe9t\xe9"}', "not UTF-8 text")


def test_deep_nesting_is_refused_without_a_recursion_error(tmp_path):
    refused(tmp_path, "[" * 100_000 + "]" * 100_000, "nested too deeply")
    deep = baseline_with({"extra_info": {"x": json.loads("[" * 80 + "]" * 80)}})
    refused(tmp_path, deep, "nested more than 64 levels")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"rounds_ms": ["1.0"]}, r"run 1, benchmark 't::a'.rounds_ms\[0\]: is str '1.0'; expected a number"),
        ({"rounds_ms": [True]}, r"rounds_ms\[0\]: is bool"),
        ({"rounds_ms": [-1.0]}, r"rounds_ms\[0\]: is -1; expected a number >= 0"),
        ({"rounds_ms": [1e308]}, r"rounds_ms\[0\]: is 1e\+308"),
        ({"rounds_ms": [1e-300]}, "below a picosecond"),
        ({"rounds_ms": [10**400]}, r"rounds_ms\[0\]: is 1000.*, too large for any number here"),
        ({"stats": summary(median_ms=0)}, r"stats.median_ms: is 0 ms, which is not a measurement; delete the stats"),
        ({"stats": summary(ci95_ms=[2.0, 3.0])}, r"stats.ci95_ms: is \[2, 3\], which does not hold the median 1"),
        ({"stats": summary(ci95_ms=[1.1, 0.9])}, r"stats.ci95_ms: is \[1.1, 0.9\], which does not hold"),
        ({"rounds_ms": "fast"}, r"rounds_ms: is str"),
        ({"timer": 3}, r"timer: is int 3; expected a string"),
        ({"stats": {"median_ms": "x"}}, r"stats.ci95_ms: is NoneType"),
        ({"kernels": [{"name": "k", "arch": "sm_90", "occupancy": 7}]}, r"kernels\[0\].occupancy: is 7"),
        ({"kernels": [{"name": "k", "arch": "sm_90", "registers": "many"}]}, r"kernels\[0\].registers: is str"),
        ({"params": {"M": [1, 2]}}, r"params.M: is \[1, 2\]"),
        ({"params": {"M": 10**400}}, r"params.M: is 1000.*, too large for any number here"),
        ({"verdict": {"status": "FINE"}}, r"verdict.status: is 'FINE'"),
        ({"nodeid": "t::b"}, "make the id 't::b', not the key 't::a'"),
        ({"confirm": {"rounds_ms": [1.0]}}, r"confirm: is dict .*; expected a list"),
        ({"confirm": [{"rounds_ms": [1.0, "x"]}]}, r"confirm\[0\].rounds_ms\[1\]: is str"),
        ({"confirm": [{"rounds_ms": [1.0], "pass_rounds": [0.5]}]}, r"confirm\[0\].pass_rounds\[0\]: is 0.5"),
    ],
)
def test_bad_values_inside_records_are_named_where_they_are(tmp_path, fields, message):
    refused(tmp_path, baseline_with(fields), message)


def test_a_commit_sha_that_is_not_text_is_named(tmp_path):
    refused(tmp_path, baseline_with(commit={"sha": 12345}), r"run 1.commit.sha: is int 12345; expected a string")
    refused(tmp_path, baseline_with(commit={"dirty": "yes"}), r"run 1.commit.dirty: is 'yes'; expected true or false")


def test_a_machine_key_that_is_a_path_is_named_with_the_file_name_to_use(tmp_path):
    message = refused(tmp_path, {**baseline_with(), "machine_key": "a/b"}, r"'machine_key' 'a/b' is not a machine key")
    assert f"set it to the file's own name, {KEY!r}" in message


def test_a_null_measured_order_reads_as_none_recorded():
    assert RunDocument.from_json({**GOOD_RUN, "measured_order": None}).measured_order == []


def test_bad_values_reach_neither_the_gate_nor_the_cli(tmp_path, capsys):
    path = write_baseline(tmp_path, baseline_with({"rounds_ms": [1.0, "slow"]}))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD_RUN))
    assert main(["compare", str(path), str(good)]) == 2
    assert "rounds_ms[1]: is str 'slow'" in capsys.readouterr().err
    assert main(["show", "main", "--dir", str(tmp_path)]) == 2


def test_nan_in_an_optional_field_reads_as_null_and_saving_goes_on(tmp_path):
    text = json.dumps(baseline_with({"tflops": 1.0})).replace('"tflops": 1.0', '"tflops": NaN')
    path = write_baseline(tmp_path, text)
    assert load_baseline(path, machine_key=KEY).runs[0].benchmarks["t::a"].tflops is None
    save_run(tmp_path, "main", KEY, RunDocument.from_json(GOOD_RUN))  # every later save still works
    assert "NaN" not in path.read_text() and len(json.loads(path.read_text())["runs"]) == 2


def test_nan_where_a_time_belongs_is_refused(tmp_path):
    text = json.dumps(baseline_with()).replace('"rounds_ms": [1.0', '"rounds_ms": [NaN')
    refused(tmp_path, text, r"rounds_ms\[0\]: is nan; expected a finite number")


def test_a_baseline_without_runs_loads_and_takes_the_next_run(tmp_path):
    path = write_baseline(tmp_path, {"schema": 1, "name": "main", "machine_key": KEY, "runs": []})
    assert load_baseline(path, machine_key=KEY).runs == []
    save_run(tmp_path, "main", KEY, RunDocument.from_json(GOOD_RUN))
    assert len(load_baseline(path, machine_key=KEY).runs) == 1


def test_a_fifo_is_refused_without_hanging(tmp_path):
    path = baseline_path(tmp_path, "main", KEY)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    outcome = {}

    def load():
        try:
            load_baseline(path, machine_key=KEY)
        except BaselineError as exc:
            outcome["error"] = str(exc)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=5)
    assert not reader.is_alive(), "reading a FIFO hung"
    assert "is a FIFO (named pipe)" in outcome["error"]


def test_a_dangling_symlink_is_named(tmp_path):
    path = baseline_path(tmp_path, "main", KEY)
    path.parent.mkdir(parents=True)
    path.symlink_to(tmp_path / "gone.json")
    with pytest.raises(BaselineError, match="a symbolic link to .*gone.json, which does not exist"):
        load_baseline(path, machine_key=KEY)
    with pytest.raises(BaselineError, match="no such file|symbolic link"):
        load_runs(path)


def test_a_symlinked_baseline_is_written_through(tmp_path):
    real = tmp_path / "store" / "real.json"
    real.parent.mkdir()
    save_run(tmp_path / "store2", "main", KEY, RunDocument.from_json(GOOD_RUN))
    real.write_text((tmp_path / "store2" / "main" / f"{KEY}.json").read_text())
    path = baseline_path(tmp_path, "main", KEY)
    path.parent.mkdir(parents=True)
    path.symlink_to(real)
    save_run(tmp_path, "main", KEY, RunDocument.from_json(GOOD_RUN))
    assert path.is_symlink() and len(json.loads(real.read_text())["runs"]) == 2


def test_a_long_name_is_refused_by_the_rule_not_the_file_system(tmp_path):
    with pytest.raises(BaselineError, match="at most 100"):
        baseline_path(tmp_path, "x" * 256, KEY)


def test_temporaries_of_a_killed_save_are_removed_by_the_next(tmp_path):
    path = save_run(tmp_path, "main", KEY, RunDocument.from_json(GOOD_RUN))
    stale = path.with_name(f".{path.name}.abc123.tmp")
    stale.write_text("{half")
    save_run(tmp_path, "main", KEY, RunDocument.from_json(GOOD_RUN))
    assert not stale.exists() and len(json.loads(path.read_text())["runs"]) == 2


def test_a_save_keeps_the_files_permissions(tmp_path):
    path = save_run(tmp_path, "main", KEY, RunDocument.from_json(GOOD_RUN))
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~current_umask()  # as open() would create it
    path.chmod(0o640)
    save_run(tmp_path, "main", KEY, RunDocument.from_json(GOOD_RUN))
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_writing_to_a_special_file_writes_through(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()), daemon=True)
    reader.start()
    files.write_atomic(fifo, "{}\n")
    reader.join(timeout=5)
    assert received == ["{}\n"] and stat.S_ISFIFO(fifo.stat().st_mode)  # still a FIFO, not replaced


def test_a_fifo_nobody_reads_is_an_error_not_a_hang(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(files.FileProblem, match="a FIFO that nobody reads"):
        files.write_atomic(fifo, "{}\n")


def test_output_checks_name_the_problem(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert files.check_writable_dir(a_file / "main") == f"{a_file} is a file, not a folder"
    assert files.check_writable_file(tmp_path) == f"is a directory; give a file path like {tmp_path / 'results.json'}"
    assert "does not exist" in files.check_writable_file(tmp_path / "no" / "r.json")
    assert files.check_writable_file(tmp_path / "r.json") is None
    assert files.check_writable_dir(tmp_path / "new" / "deeper") is None


def test_a_full_disk_or_read_only_folder_is_found_by_writing(tmp_path, monkeypatch):
    import errno
    import tempfile

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tempfile, "mkstemp", full)
    assert files.check_writable_dir(tmp_path) == f"cannot write in {tmp_path}: No space left on device"


def test_a_name_of_an_open_descriptor_is_written_into_it_not_replaced(tmp_path):
    log = tmp_path / "log.txt"
    with open(log, "w") as stream:  # as `> log.txt` opens a job's stdout
        stream.write("pytest's output\n")
        stream.flush()
        descriptor = stream.fileno()
        for name in (f"/dev/fd/{descriptor}", f"/proc/self/fd/{descriptor}"):
            assert files.check_writable_file(name) is None
            files.write_atomic(name, "{}\n")
        stream.write("1 passed\n")
    assert log.read_text() == "pytest's output\n{}\n{}\n1 passed\n"
    with open(log) as stream:
        assert files.check_writable_file(f"/dev/fd/{stream.fileno()}").endswith("open read-only; give a file path")
