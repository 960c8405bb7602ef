"""The C allocator's thresholds, fixed in every measuring process (machine/allocator.py).

Where a block comes from shows the threshold without timing anything: glibc serves a block
below its mmap threshold from the heap (the ``[heap]`` range of /proc/self/maps) and one above
it from a mapping of its own."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from pytest_tesserabench.machine import allocator

pytestmark = pytest.mark.skipif(allocator._glibc() is None, reason="glibc's malloc on 64-bit Linux only")

# In the process that runs it: does an 8 MB block come from the heap? (Above the 128 KiB start
# threshold, below the fixed 32 MiB one.)
FROM_HEAP = textwrap.dedent(
    """
    import ctypes
    def block_from_heap(size=8 << 20):
        libc = ctypes.CDLL(None)
        libc.malloc.restype = ctypes.c_void_p
        libc.malloc.argtypes = (ctypes.c_size_t,)
        libc.free.argtypes = (ctypes.c_void_p,)
        block = libc.malloc(size)
        with open("/proc/self/maps") as maps:
            heap = [line.split()[0].split("-") for line in maps if line.rstrip().endswith("[heap]")]
        from_heap = any(int(low, 16) <= block < int(high, 16) for low, high in heap)
        libc.free(block)
        return from_heap
    """
)


def _python(code: str, env: dict | None = None) -> str:
    return subprocess.run(
        [sys.executable, "-c", FROM_HEAP + textwrap.dedent(code)], capture_output=True, text=True, env=env, check=True
    ).stdout.strip()


def test_fixed_thresholds_serve_a_large_block_from_the_heap_where_a_fresh_process_maps_it():
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    assert _python("print(block_from_heap())", clean) == "False"  # a fresh process: a mapping
    fixed = """
        from pytest_tesserabench.machine import allocator
        print(allocator.fix_thresholds(), block_from_heap())
    """
    assert _python(fixed, clean) == "fixed: mmap 32 MiB, trim 64 MiB True"


def test_the_thresholds_go_to_the_processes_it_starts_and_a_users_own_stay():
    environ = {}
    assert allocator.fix_thresholds(environ).startswith("fixed")
    assert environ == {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(64 << 20)}
    assert allocator.fix_thresholds(environ).startswith("fixed")  # (a child of ours: the same again)
    assert allocator.fix_thresholds({"MALLOC_MMAP_THRESHOLD_": "131072"}) == "left as set (MALLOC_MMAP_THRESHOLD_)"
    tunables = {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}
    assert allocator.fix_thresholds(tunables) == "left as set (GLIBC_TUNABLES)"
    assert "MALLOC_MMAP_THRESHOLD_" not in tunables


def test_where_mallopt_refuses_the_processes_it_starts_are_left_alone_too(monkeypatch):
    class Refusing:
        def __init__(self):
            self.mallopt = lambda *_: 0

    monkeypatch.setattr(allocator, "_glibc", Refusing)
    environ = {}
    assert allocator.fix_thresholds(environ) == "left as they are: mallopt refused the thresholds"
    assert environ == {}  # (children fixed and this process not would be two states again)


def test_every_measuring_process_of_a_save_has_them_and_a_plain_run_does_not(pytester, monkeypatch):
    # The session's own process (mallopt) and the save's fresh processes (the environment) alike:
    # before, the canary's freed block left the session's process alone past the threshold.
    for name in list(os.environ):
        if name.startswith("MALLOC_") or name == "GLIBC_TUNABLES":
            monkeypatch.delenv(name)
    pytester.makepyfile(
        test_a=FROM_HEAP
        + textwrap.dedent(
            """
            import json, os
            def test_a(bench):
                with open("seen.jsonl", "a") as out:
                    out.write(json.dumps([os.getpid(), block_from_heap()]) + "\\n")
                bench(sum, range(100))
            """
        )
    )
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert {heap for _, heap in map(json.loads, (pytester.path / "seen.jsonl").read_text().splitlines())} == {False}
    (pytester.path / "seen.jsonl").unlink()
    args = ("--bench-save=main", "--bench-max-time=0.05", "--bench-warmup=0.01", "--bench-save-processes=2")
    pytester.runpytest_subprocess("-p", "no:cacheprovider", *args).assert_outcomes(passed=1)
    seen = [json.loads(line) for line in (pytester.path / "seen.jsonl").read_text().splitlines()]
    assert len({pid for pid, _ in seen}) == 3 and all(heap for _, heap in seen), seen
