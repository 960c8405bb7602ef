import json
import multiprocessing
import subprocess
import tempfile
from dataclasses import replace

import pytest

from pytest_tesserabench.context import git_commit_info
from pytest_tesserabench.history.baseline import (
    BaselineError,
    baseline_path,
    load_baseline,
    load_runs,
    outlying,
    save_run,
    validate_name,
)
from pytest_tesserabench.record import files
from pytest_tesserabench.record.results import RunDocument, Verdict

KEY = "cpu-x86-64-test"


def run_dict(i=0, **extra):
    return {
        "schema": 1,
        "machine": {"python": "3.11"},
        "commit": {"sha": None},
        "started": f"t{i}",
        "canary_ms": [1.0],
        "benchmarks": {"t::a": {"timer": "cpu", "rounds_ms": [1.0 + i], "samples_ms": [1.0, 2.0]}},
        **extra,
    }


def make_run(i=0, **extra):
    return RunDocument.from_json(run_dict(i, **extra))


@pytest.mark.parametrize("name", ["main", "release-1.2", "a_b.C"])
def test_good_names(name):
    assert validate_name(name) == name


@pytest.mark.parametrize(
    "name", ["", "a/b", "../x", "a b", "ä", "x\\y", "main\n", ".hidden", "-", "main.json", "..main", "a..b", "main."]
)
def test_bad_names_are_refused_with_the_rule(name):
    with pytest.raises(BaselineError, match="it must start with a letter or digit and hold only letters"):
        validate_name(name)
    with pytest.raises(BaselineError):
        baseline_path("root", name, KEY)


@pytest.mark.parametrize("name", [".", ".."])
def test_the_current_or_parent_folder_is_refused_as_a_path(name):
    # (they match the rule's characters: saying the rule would not say why)
    with pytest.raises(BaselineError, match=f"'{name}' is not allowed: it is a path, not a name"):
        validate_name(name)
    with pytest.raises(BaselineError):
        baseline_path("root", name, KEY)


def test_machine_key_is_checked_like_a_name(tmp_path):
    with pytest.raises(BaselineError, match="machine key"):
        baseline_path(tmp_path, "main", "../evil")


def test_save_appends_keeps_history_and_strips_samples(tmp_path):
    for i in range(4):
        path = save_run(tmp_path, "main", KEY, make_run(i), history=3)
    assert path == tmp_path / "main" / f"{KEY}.json"
    data = json.loads(path.read_text())
    assert [run["started"] for run in data["runs"]] == ["t1", "t2", "t3"]
    assert all("samples_ms" not in r["benchmarks"]["t::a"] for r in data["runs"])
    assert data["name"] == "main" and data["machine_key"] == KEY and data["schema"] == 1
    # diffable and stable: sorted keys, a field a line, a list of numbers on one line
    text = path.read_text()
    assert text.splitlines()[:4] == ["{", f'  "machine_key": "{KEY}",', '  "name": "main",', '  "runs": [']
    assert '"rounds_ms": [' in text and '"rounds_ms": [\n' not in text
    loaded = load_baseline(path, machine_key=KEY)
    assert [run.started for run in loaded.runs] == ["t1", "t2", "t3"] and loaded.name == "main"
    assert sorted(p.name for p in path.parent.iterdir()) == [f"{KEY}.json"]  # no lock file beside it


def test_saving_to_many_baselines_leaves_no_more_lock_files_than_the_slots(tmp_path, monkeypatch):
    locks_tmp = tmp_path / "tmp"
    locks_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(locks_tmp))
    for i in range(3 * files.LOCK_SLOTS):
        save_run(tmp_path / "baselines", f"b{i}", KEY, make_run(i), say=lambda message: None)
    lock_files = list((locks_tmp / "tesserabench-locks").glob("*.lock"))
    assert 0 < len(lock_files) <= files.LOCK_SLOTS
    assert not list((locks_tmp / "tesserabench-locks").glob("*.holder.json"))  # every lock was released


def test_history_is_kept_per_benchmark_so_a_save_of_one_does_not_push_the_others_out(tmp_path):
    def run(i, *ids):
        data = run_dict(i)
        data["benchmarks"] = {bench_id: {"timer": "cpu", "rounds_ms": [1.0], "samples_ms": [1.0]} for bench_id in ids}
        return RunDocument.from_json(data)

    save_run(tmp_path, "main", KEY, run(0, "t::a", "t::b"), history=2)
    save_run(tmp_path, "main", KEY, run(1, "t::a", "t::b"), history=2)
    for i in range(2, 5):  # three saves of t::a alone (-k)
        path = save_run(tmp_path, "main", KEY, run(i, "t::a"), history=2)
    kept = load_runs(path)
    # t::b keeps its last two runs, which hold t::a too; t::a its last two
    assert [r.started for r in kept] == ["t0", "t1", "t3", "t4"]
    path = save_run(tmp_path, "main", KEY, run(5, "t::a", "t::b"), history=2)
    assert [r.started for r in load_runs(path)] == ["t1", "t4", "t5"]


def test_the_callers_run_is_not_modified(tmp_path):
    run = make_run()
    save_run(tmp_path, "main", KEY, run)
    assert run.benchmarks["t::a"].samples_ms == [1.0, 2.0]


def test_verdicts_are_never_saved_into_a_baseline(tmp_path):
    run = make_run()
    verdict = Verdict(id="t::a", status="REGRESSED", severity="mild")
    run.benchmarks["t::a"] = replace(run.benchmarks["t::a"], verdict=verdict)
    path = save_run(tmp_path, "main", KEY, run)
    saved = json.loads(path.read_text())["runs"][0]["benchmarks"]["t::a"]
    assert saved["verdict"] is None
    assert run.benchmarks["t::a"].verdict is not None  # the session's own record keeps it


def test_absent_baseline_is_none(tmp_path):
    assert load_baseline(tmp_path / "main" / "x.json", machine_key=KEY) is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        (  # two branches saved into it, and git left both sides
            '{\n  "schema": 1,\n<<<<<<< HEAD\n  "runs": [1]\n=======\n  "runs": [2]\n>>>>>>> pr-7\n}\n',
            r"holds a git merge conflict \(line 3: '<<<<<<<'\).*git checkout --theirs",
        ),
        (json.dumps({"schema": 2, "machine_key": KEY, "runs": []}), "schema 2"),
        (json.dumps({"schema": 1, "machine_key": "other", "runs": []}), "machine 'other'"),
        (json.dumps([1, 2]), "not a TesseraBench baseline"),
        (json.dumps({"schema": 1, "machine_key": KEY, "runs": [{"schema": 1}]}), "run 1.benchmarks: is NoneType"),
    ],
)
def test_bad_file_is_named_and_never_overwritten(tmp_path, content, message):
    path = baseline_path(tmp_path, "main", KEY)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    before = path.read_bytes()
    with pytest.raises(BaselineError, match=message) as info:
        save_run(tmp_path, "main", KEY, make_run())
    assert str(path) in str(info.value)
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir() if p.suffix == ".tmp"] == []


def test_unserialisable_run_writes_nothing(tmp_path):
    run = make_run()
    run.benchmarks["t::a"].extra_info["x"] = object()
    with pytest.raises(BaselineError, match="not plain JSON"):
        save_run(tmp_path, "main", KEY, run)
    assert not baseline_path(tmp_path, "main", KEY).exists()


def test_bad_history(tmp_path):
    with pytest.raises(BaselineError, match="bench_history"):
        save_run(tmp_path, "main", KEY, make_run(), history=0)


def _save_one(args):
    root, i = args
    save_run(root, "main", KEY, make_run(i), history=100)


def test_parallel_savers_never_lose_or_mangle_a_run(tmp_path):
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pool.map(_save_one, [(tmp_path, i) for i in range(8)])
    data = load_baseline(baseline_path(tmp_path, "main", KEY), machine_key=KEY)
    assert sorted(r.started for r in data.runs) == [f"t{i}" for i in range(8)]


def test_load_runs(tmp_path):
    path = save_run(tmp_path, "main", KEY, make_run(1))
    save_run(tmp_path, "main", KEY, make_run(2))
    assert [r.started for r in load_runs(path)] == ["t1", "t2"]
    single = tmp_path / "run.json"
    single.write_text(json.dumps(run_dict(5)))
    assert load_runs(single)[0].started == "t5"
    other = tmp_path / "other.json"
    other.write_text("{}")
    with pytest.raises(BaselineError, match="neither"):
        load_runs(other)
    with pytest.raises(BaselineError, match="no such file"):
        load_runs(tmp_path / "absent.json")


def test_git_commit_info(tmp_path):
    assert git_commit_info(tmp_path) == {"sha": None, "branch": None, "dirty": None}

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q", "-b", "work")
    (tmp_path / "f").write_text("1")
    git("add", "f")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x")
    info = git_commit_info(tmp_path)
    assert len(info["sha"]) == 40 and info["branch"] == "work" and info["dirty"] is False
    (tmp_path / "f").write_text("2")
    assert git_commit_info(tmp_path)["dirty"] is True


def _saved(session_ms: float, *fresh_ms: float) -> RunDocument:
    """A saved run of one benchmark: the session's process at ``session_ms``, fresh ones too."""
    record = {"timer": "cpu", "rounds_ms": [session_ms] * 5}
    if fresh_ms:
        record["confirm"] = [{"rounds_ms": [ms] * 5, "pass_rounds": [5]} for ms in fresh_ms]
    return RunDocument.from_json({"benchmarks": {"t.py::x": record}})


def test_a_saved_figure_is_outlying_against_what_measured_it_like_with_like():
    def far(run, earlier):
        return [(o.bench_id, o.against, o.ratio > 1) for o in outlying(run, earlier)]

    quiet = _saved(0.018, 0.018, 0.018)
    # a save on a busy machine: its session read 200x; on a first save its own fresh processes say so
    busy = _saved(3.6, 0.018, 0.018)
    assert far(busy, []) == [("t.py::x", "fresh", True)]
    assert "this run's own process was slowed" in outlying(busy, [])[0].blame()
    # ... and where its fresh processes read it far slower, they were disturbed, or this process
    # runs it faster (a scipy FFT read 585 us in the session and 989 us fresh, the machine idle)
    (fresh_slow,) = outlying(_saved(0.018, 3.6, 3.6), [])
    assert fresh_slow.ratio < 1 and "fresh processes read it slower" in fresh_slow.blame()
    assert "or the tests before it leave it faster in this run's own process" in fresh_slow.blame()
    # with earlier runs, this run's process is compared with theirs: two quiet ones blame this run
    assert far(busy, [quiet, quiet]) == [("t.py::x", "runs", True)]
    assert "the machine was busy during this run" in outlying(busy, [quiet, quiet])[0].blame()
    # the next, quiet save is not the outlier: one busy run among two earlier is outvoted
    assert far(quiet, [quiet, busy]) == []
    # two busy earlier runs, then a quiet one: the earlier runs are blamed, not this one
    (earlier_busy,) = outlying(quiet, [busy, busy])
    assert earlier_busy.ratio < 1 and "the baseline's earlier runs read it slower" in earlier_busy.blame()
    # one earlier run: which of the two is off, nobody knows, and the line says so
    assert "one of them was timed on a busy machine" in outlying(quiet, [busy])[0].blame()
    # a steady difference between a run's own process and its fresh ones is no busy machine
    steady = _saved(0.029, 0.018, 0.018)
    assert far(steady, [steady, steady]) == [] and far(steady, [steady]) == []
    # timings the gate never judges are never outlying
    interpreted = RunDocument.from_json({"benchmarks": {"t.py::x": {"timer": "interpreter", "rounds_ms": [3.6] * 5}}})
    assert outlying(interpreted, [quiet, quiet]) == []


def test_a_saved_multithreaded_figure_crowded_out_by_other_processes_says_so():
    # Two threads had two CPUs in the earlier runs; beside other work they got one and read 500x
    # (threads spinning at a barrier for a CPU another process holds): not a slower machine.
    def run(ms, own_cpus, others_cpus):
        sampling = {"own_cpu_s": own_cpus, "others_cpu_s": others_cpus, "others_wall_s": 1.0}
        return RunDocument.from_json(
            {"benchmarks": {"t.py::x": {"timer": "cpu", "rounds_ms": [ms] * 5, "sampling": sampling}}}
        )

    quiet = run(0.007, 1.8, 0.0)
    (crowded,) = outlying(run(3.6, 1.0, 0.6), [quiet, quiet])
    assert crowded.blame().startswith(
        "its threads got 1.0 CPUs, 1.8 in the baseline, while other processes kept 0.6 busy"
    )
    assert "--bench-threads=1" in crowded.blame()
    # a single-threaded one under the same load is blamed on the busy machine, as before
    (busy,) = outlying(run(3.6, 1.0, 0.6), [run(0.007, 1.0, 0.0)] * 2)
    assert busy.crowded is None and "the machine was busy during this run" in busy.blame()


def test_process_draws_count_every_process_of_the_runs_the_next_save_keeps():
    from pytest_tesserabench.history.baseline import process_draws

    three = _saved(1.0, 1.0, 1.0)  # its own process and two fresh ones
    one = _saved(1.0)
    assert process_draws([], 10) == {}  # (a benchmark never saved: the save's own process alone)
    assert process_draws([three, three], 10) == {"t.py::x": 1 + 3 + 3}
    assert process_draws([three, one, one], 10) == {"t.py::x": 1 + 3 + 1 + 1}
    # with a history of 3 runs, the next save pushes the oldest out: it counts no more
    assert process_draws([three, one, one], 3) == {"t.py::x": 1 + 1 + 1}
    # an interpreted kernel's timings are measured in no fresh process: no draws to lack
    interpreted = RunDocument.from_json({"benchmarks": {"t.py::k": {"timer": "interpreter", "rounds_ms": [3.6] * 5}}})
    assert process_draws([interpreted, three, three, three], 10) == {"t.py::x": 1 + 9}


def test_a_record_keeps_the_function_it_measured_and_refuses_one_that_is_not_text():
    record = {"timer": "cpu", "rounds_ms": [1.0] * 3, "function": "json.dumps"}
    (kept,) = RunDocument.from_json({"benchmarks": {"t.py::x": record}}).benchmarks.values()
    assert kept.function == "json.dumps" and kept.to_json()["function"] == "json.dumps"
    with pytest.raises(ValueError, match=r"t\.py::x.*function"):
        RunDocument.from_json({"benchmarks": {"t.py::x": {**record, "function": 3}}})


def test_the_header_names_every_benchmark_and_kernel_the_baseline_holds_not_its_newest_run_s():
    # two full saves, then one of a single benchmark (-k): the gate still judges all three
    from pytest_tesserabench.history.baseline import Baseline
    from pytest_tesserabench.history.comparison import BaselineComparison
    from pytest_tesserabench.options import Settings

    kernel = {"name": "k", "arch": "sm_90", "occupancy": 0.5}
    full = {
        "t.py::a": {"timer": "cpu", "rounds_ms": [1.0] * 5},
        "t.py::b": {"timer": "cpu", "rounds_ms": [2.0] * 5},
        "t.py::k": {"timer": "interpreter", "rounds_ms": [80.0] * 3, "kernels": [kernel]},
    }
    runs = [RunDocument.from_json({"benchmarks": full})] * 2
    runs.append(RunDocument.from_json({"benchmarks": {"t.py::a": full["t.py::a"]}}))
    baseline = Baseline("main", "cpu-x", runs)
    settings = Settings(enabled=True, compare="main")
    said = BaselineComparison(baseline, same_machine=True, settings=settings).describe()
    assert said.endswith("3 run(s); the timings of 2 benchmark(s), the figures of 1 kernel(s) on sm_90)")
    elsewhere = BaselineComparison(baseline, same_machine=False, settings=settings).describe()
    assert elsewhere.endswith("; the figures of 1 kernel(s) on sm_90 only (another machine))")
