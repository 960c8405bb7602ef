"""The C allocator's thresholds, fixed in every measuring process.

Why: glibc's malloc serves a block above its mmap threshold (128 KiB at start) with a fresh
mapping, which it unmaps on free, so each use of it pays page faults; and it raises that
threshold, for the life of the process, to the size of the first such block freed (up to 32 MiB
on 64-bit). Whether a benchmark's temporaries (numpy's, torch's CPU tensors) pay those faults on
every call then depends on what the process freed before: a 512x512 float64 stencil read 2.3 ms
in a fresh Python and 1.3 ms once the process had freed one 16 MB array. Nothing the test does
decides it: the plugin's own memory canary frees such an array in the process that runs the
session, not in its fresh processes, so one benchmark read at two levels by process. Fixing both
thresholds at the level a long-lived process settles on (mmap 32 MiB, trim twice that, as glibc's
own rule sets it) measures every process, fresh, served or xdist worker, in that one state.

Set for this process (``mallopt``) and, as environment variables, for every process it starts
(glibc reads them at start). A threshold the user set (``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``, or either tunable in ``GLIBC_TUNABLES``) is left alone: setting
either already turns glibc's moving threshold off. Other C libraries are left as they are.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD = -1  # mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit, the most mallopt takes
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # as glibc sets it when it raises the mmap threshold
ENVIRONMENT = {"MALLOC_MMAP_THRESHOLD_": MMAP_THRESHOLD, "MALLOC_TRIM_THRESHOLD_": TRIM_THRESHOLD}
TUNABLES = ("glibc.malloc.mmap_threshold", "glibc.malloc.trim_threshold")


def _glibc():
    """This process's C library when it is glibc on a 64-bit Linux, else None."""
    if not sys.platform.startswith("linux") or sys.maxsize < 2**32:
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 (only glibc has it)
        return libc
    except (OSError, AttributeError):
        return None


def user_thresholds(environ=os.environ) -> str | None:
    """The variable through which the user set a threshold, if any."""
    for name in ENVIRONMENT:
        if name in environ:
            return name
    if any(tunable in environ.get("GLIBC_TUNABLES", "") for tunable in TUNABLES):
        return "GLIBC_TUNABLES"
    return None


def fix_thresholds(environ=os.environ) -> str:
    """Fix the thresholds here and for the processes this one starts; says what was done."""
    libc = _glibc()
    if libc is None:
        return "left as they are (not glibc on 64-bit Linux)"
    ours = all(environ.get(name) == str(value) for name, value in ENVIRONMENT.items())
    chosen = user_thresholds(environ)
    if chosen is not None and not ours:
        return f"left as set ({chosen})"
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    if not (libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        # (nor for the processes it starts: they would measure in another state than this one)
        return "left as they are: mallopt refused the thresholds"
    for name, value in ENVIRONMENT.items():
        environ[name] = str(value)
    return f"fixed: mmap {MMAP_THRESHOLD >> 20} MiB, trim {TRIM_THRESHOLD >> 20} MiB"
