"""Options and ini keys resolve once into Settings; bad values are usage errors naming the source."""

from pathlib import Path

import pytest

from pytest_tesserabench import options


def resolve(cli=None, ini=None, root=Path("/r")):
    return options.resolve(cli or {}, ini or {}, root)


def test_defaults():
    s = resolve()
    assert (s.enabled, s.threshold, s.max_time, s.min_rounds, s.history, s.alpha) == (False, 0.05, 1.0, 5, 10, 0.01)
    assert s.bench_dir == Path("/r/baselines")


def test_command_line_beats_ini_and_ini_beats_default():
    s = resolve({"bench_max_time": "3"}, {"bench_max_time": "2", "bench_min_rounds": "7"})
    assert s.max_time == 3.0 and s.min_rounds == 7
    assert s.sources["max_time"] == "command line" and s.sources["min_rounds"] == "ini key bench_min_rounds"


@pytest.mark.parametrize("text, fraction", [("5", 0.05), ("5%", 0.05), ("2.5", 0.025)])
def test_threshold_is_a_percentage(text, fraction):
    assert resolve({"bench_threshold": text}).threshold == pytest.approx(fraction)


def test_save_and_compare_imply_bench():
    assert resolve({"bench_save": "main"}).enabled
    assert resolve({"bench_compare": "main"}).enabled


def test_relative_ini_paths_are_relative_to_rootdir():
    assert resolve(ini={"bench_dir": "perf/base"}).bench_dir == Path("/r/perf/base")


@pytest.mark.parametrize(
    "cli, culprit",
    [
        ({"bench_threshold": "abc"}, "--bench-threshold='abc' (command line)"),
        ({"bench_threshold": "-1"}, "--bench-threshold='-1'"),
        ({"bench_threshold": "1001"}, "--bench-threshold='1001'"),
        ({"bench_target_ci": "0"}, "--bench-target-ci='0'"),
        ({"bench_warmup": "1e9"}, "--bench-warmup='1e9'"),
        ({"bench_max_time": "1e9"}, "--bench-max-time='1e9'"),
        ({"bench_save": "x" * 101}, "at most 100"),
        ({"bench_interpret": "sometimes"}, "--bench-interpret='sometimes'"),
        ({"bench_max_time": "0"}, "--bench-max-time='0'"),
        ({"bench_max_time": "-1"}, "--bench-max-time='-1'"),
        ({"bench_min_rounds": "0"}, "--bench-min-rounds='0'"),
        ({"bench_min_rounds": "2.5"}, "--bench-min-rounds='2.5'"),
        ({"bench_save": "../etc"}, "--bench-save='../etc'"),
        ({"bench_compare": "a/b"}, "--bench-compare='a/b'"),
        ({"bench_save": ".."}, "--bench-save='..'"),
        ({"bench_save": "main\n"}, "--bench-save='main\\n' (command line): must start with a letter or digit"),
        ({"bench_timer": "wallclock"}, "--bench-timer='wallclock'"),
        ({"bench_arch": "sm_75"}, "--bench-arch='sm_75'"),
        ({"bench_peaks": "guess"}, "--bench-peaks='guess'"),
        ({"bench_confirm": "9"}, "--bench-confirm='9' (command line): must be a whole number from 0 (never) to 8"),
        ({"bench_confirm": "two"}, "--bench-confirm='two'"),
    ],
)
def test_bad_values_name_the_option(cli, culprit):
    with pytest.raises(options.SettingsError) as err:
        resolve(cli)
    assert culprit in str(err.value)


def test_a_served_process_leaves_comparing_saving_and_files_to_the_session_that_started_it(tmp_path):
    # The project's addopts reach a served process too (--bench-ab's sides, --bench-confirm's fresh
    # processes): it must not judge, confirm, save or write reports of its own.
    ini = {"bench_compare": "main", "bench_save": "main", "bench_json": "out.json", "bench_md": "out.md"}
    served = resolve({"bench_ab_serve": "/tmp/socket"}, ini, tmp_path)
    assert (served.compare, served.save, served.json_path, served.md_path) == (None, None, None, None)
    assert served.enabled and not served.github_summary
    assert resolve({}, ini, tmp_path).compare == "main"  # (the session itself keeps them)


def test_bad_ini_value_names_the_ini_key():
    with pytest.raises(options.SettingsError, match=r"bench_history='many' \(ini key bench_history\)"):
        resolve(ini={"bench_history": "many"})


def test_json_path_in_missing_folder_is_refused(tmp_path):
    with pytest.raises(options.SettingsError, match="does not exist"):
        resolve({"bench_json": str(tmp_path / "nope" / "r.json")})


def test_marker_overrides_and_validation():
    base = resolve()
    s, group = options.apply_marker(base, {"max_time": 2, "group": "g", "threshold": 10}, "t.py::x")
    assert (s.max_time, s.threshold, group) == (2.0, 0.10, "g")
    with pytest.raises(options.SettingsError, match=r"unknown argument\(s\) max_tme"):
        options.apply_marker(base, {"max_tme": 2}, "t.py::x")
    with pytest.raises(options.SettingsError, match=r"@pytest.mark.bench\(min_rounds=0\) on t.py::x"):
        options.apply_marker(base, {"min_rounds": 0}, "t.py::x")


def test_usage_error_through_pytest(pytester):
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("--bench-max-time=soon")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--bench-max-time='soon' (command line): must be a number above 0 up to 3600*"])


def test_ini_keys_work_through_pytest(pytester, fast):
    pytester.makeini("[pytest]\nbench = true\nbench_min_rounds = 4\nbench_max_time = 0.01\nbench_warmup = 0\n")
    pytester.makepyfile("""
        def test_a(bench):
            bench(sum, [1, 2])
            assert bench.records[None].stats.rounds >= 4
    """)
    pytester.runpytest().assert_outcomes(passed=1)


def test_unwritable_json_path_is_a_usage_error(pytester):
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("--bench-json=missing/dir/out.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--bench-json=missing*folder missing/dir does not exist*"])
