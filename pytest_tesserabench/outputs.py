"""The run's files, written once at the end of the session (on the xdist controller): the
``--bench-json`` run file and the ``--bench-save`` baseline. Each says what it wrote; a failure
is one error line and a failed session, never a traceback; nothing is saved from an interrupted
run (Ctrl-C), since half a run in a baseline would pass for a whole one."""

from __future__ import annotations


def write_outputs(state, reporter, *, interrupted: bool) -> bool:
    """Write what the settings ask for; True when something could not be written."""
    from pytest_tesserabench.baseline import BaselineError

    settings = state.settings
    failed = False

    def say(message: str, **markup) -> None:
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(message, **markup)

    def error(message: str) -> None:
        nonlocal failed
        failed = True
        say(f"ERROR: {message}", red=True)

    if settings.json_path is not None:
        try:
            state.write_json()
        except (OSError, ValueError) as exc:
            error(f"--bench-json={settings.json_path}: cannot write the results: {exc}")
        else:
            say(f"tesserabench: wrote {len(state.records)} benchmark(s) to {settings.json_path}")
    if settings.save:
        if interrupted:
            say(f"tesserabench: nothing saved to baseline {settings.save}: the run was interrupted", yellow=True)
            return failed
        try:
            path, saved = state.save_baseline()
        except (BaselineError, OSError) as exc:
            error(f"--bench-save={settings.save}: nothing saved: {exc}")
        else:
            skipped = len(state.records) - saved
            if saved:
                left_out = f" ({skipped} from failed tests left out)" if skipped else ""
                say(f"tesserabench: saved {saved} benchmark(s) to {path}{left_out}")
            else:
                say(f"tesserabench: nothing saved to {path}: no passing benchmark")
    return failed
