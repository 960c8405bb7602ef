"""processes/zygote.py: A/B's served processes forked from one process that imported the heavy
libraries once. Each child must be what ``python -m pytest`` in its folder would have been."""

import os
import signal
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from pytest_tesserabench.processes import zygote
from pytest_tesserabench.processes.served import served_environment

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forking served processes is Linux-only")


@pytest.fixture
def started(tmp_path):
    made, why = zygote.Zygote.start(served_environment(pinned=True), ["json"], tmp_path / "zygote.log")
    assert made is not None, why
    yield made
    made.close()


def _fork(started, folder, test_source: str, extra_env=None):
    folder.mkdir(exist_ok=True)
    (folder / "test_child.py").write_text(textwrap.dedent(test_source))
    (folder / "helper_here.py").write_text("WHERE = 'the child folder'\n")
    env = {**served_environment(pinned=True), **(extra_env or {})}
    args = ["-q", "-p", "no:randomly", "-p", "no:cacheprovider", "test_child.py"]
    return started.fork(args, env, folder, folder / "log")


def test_a_forked_child_is_the_pytest_of_its_folder_with_its_own_environment(started, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "from_pythonpath.py").write_text("VALUE = 42\n")
    child = _fork(
        started,
        tmp_path / "side",
        f"""
        import os, sys
        import from_pythonpath, helper_here

        def test_it():
            assert os.getcwd() == {str(tmp_path / "side")!r}
            assert os.environ["ONLY_THIS_CHILD"] == "yes"
            assert from_pythonpath.VALUE == 42 and helper_here.WHERE == "the child folder"
            assert sys.path.index({str(elsewhere)!r}) < sys.path.index(os.path.dirname(os.__file__))
            assert "json" in sys.modules  # preloaded by the zygote
            assert os.getppid() != {os.getpid()}  # forked by the zygote, not started by us
        """,
        {"ONLY_THIS_CHILD": "yes", "PYTHONPATH": str(elsewhere)},
    )
    assert child.wait(timeout=60) == 0, (tmp_path / "side" / "log").read_text()
    log = (tmp_path / "side" / "log").read_text()
    assert "1 passed" in log and "Warning" not in log, log  # (a user's -W error would make a warning fail it)
    assert "ONLY_THIS_CHILD" not in os.environ


def test_a_childs_failure_and_crash_are_its_exit_status_as_for_a_spawned_process(started, tmp_path):
    failed = _fork(started, tmp_path / "fails", "def test_it():\n    assert False\n")
    crashed = _fork(started, tmp_path / "crashes", "import os\ndef test_it():\n    os.abort()\n")
    assert failed.wait(timeout=60) == 1
    assert crashed.wait(timeout=60) == -signal.SIGABRT


def test_a_child_is_terminated_and_waited_for_with_a_timeout(started, tmp_path):
    child = _fork(started, tmp_path / "hangs", "import time\ndef test_it():\n    time.sleep(600)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=0.5)
    child.terminate()
    assert child.wait(timeout=60) == -signal.SIGTERM
    assert child.poll() == -signal.SIGTERM


def test_a_zygote_with_threads_after_its_imports_does_not_fork(tmp_path, monkeypatch):
    (tmp_path / "starts_a_thread.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    )
    env = {**served_environment(pinned=True), "PYTHONPATH": str(tmp_path)}
    made, why = zygote.Zygote.start(env, ["starts_a_thread"], tmp_path / "zygote.log")
    assert made is None and "2 threads" in why
    sized = {**env, "OPENBLAS_NUM_THREADS": "2"}
    made, why = zygote.Zygote.start(sized, ["starts_a_thread"], tmp_path / "zygote2.log")
    assert made is None and why.endswith("after its imports: OPENBLAS_NUM_THREADS=2"), why


def test_no_fork_when_asked_or_nothing_to_preload(tmp_path, monkeypatch):
    made, why = zygote.Zygote.start(served_environment(pinned=True), [], tmp_path / "zygote.log")
    assert made is None and "import none of" in why
    monkeypatch.setenv(zygote.NO_FORK_ENV, "1")
    made, why = zygote.Zygote.start(served_environment(pinned=True), ["json"], tmp_path / "zygote.log")
    assert made is None and zygote.NO_FORK_ENV in why


def test_only_modules_the_session_imported_and_no_side_shadows_are_preloaded(tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    (here / "src" / "triton").mkdir(parents=True)  # the project vendors its own triton
    (there / "sub").mkdir(parents=True)
    (there / "sub" / "scipy.py").write_text("")  # REF has a scipy.py where its pytest runs (a subfolder)
    (here / "lib").mkdir()
    (here / "lib" / "torch.py").write_text("")  # imported from the tree through an ini pythonpath
    imported = {name: None for name in ("numpy", "scipy", "scipy.stats", "triton", "json")}
    imported["torch"] = types.SimpleNamespace(__file__=str(here / "lib" / "torch.py"))
    assert zygote.preload_for(imported, [here, there], Path("sub")) == ["numpy"]
    imported["torch"] = types.SimpleNamespace(__file__=str(tmp_path / "site-packages" / "torch" / "__init__.py"))
    assert zygote.preload_for(imported, [here, there], Path("sub")) == ["numpy", "torch"]
    assert "scipy" in zygote.preload_for(imported, [here, there])  # REF's sub/ is not where pytest runs


def test_a_library_installed_in_a_venv_inside_the_project_is_preloaded(tmp_path):
    # the common layout: the project's .venv lies inside its tree, ignored by git
    tree, venv = tmp_path / "project", tmp_path / "project" / ".venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    imported = {"numpy": types.SimpleNamespace(__file__=str(site / "numpy" / "__init__.py"))}
    assert zygote.preload_for(imported, [tree], installed=[venv, site]) == ["numpy"]
    (tree / "lib").mkdir(parents=True)  # but a numpy of the project's own, on an ini pythonpath, is not
    imported["numpy"] = types.SimpleNamespace(__file__=str(tree / "lib" / "numpy.py"))
    assert zygote.preload_for(imported, [tree], installed=[venv, site]) == []
