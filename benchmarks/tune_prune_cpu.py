"""Static pruning of the project's matmul and attention spaces for sm_90 and sm_80, on the CPU
(and of the Hopper TMA matmul's space for sm_90).

    .venv/bin/python benchmarks/tune_prune_cpu.py [--cache-dir DIR] [--jobs N] [--passes 2]

The first pass compiles every config the constraints allow (cold, unless DIR already holds
them); later passes read the analysis cache (warm). The target of issue 14 is the warm figure:
all spaces pruned in under a minute. Each line: kernel, problem, target, configs kept of
the legal ones, per-rule removals, and seconds. No GPU is used or needed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # silence Triton 3.9's warning; its default

from pytest_tesserabench.tuning.pruning import RULES, prune  # noqa: E402
from pytest_tesserabench.tuning.tunable import load_tunable  # noqa: E402
from pytest_tesserabench.tuning.tuner import arch_context  # noqa: E402

# The pointer matmul and attention for both targets; the TMA matmul (what matmul() runs on
# Hopper) for sm_90 only: its space's constraints allow no other target.
SPACES = (
    ("kernels.matmul:TUNABLE", ("sm_90", "sm_80")),
    ("kernels.matmul:TUNABLE_TMA", ("sm_90",)),
    ("kernels.attention:TUNABLE", ("sm_90", "sm_80")),
)


def one_pass(cache_dir: Path, jobs: int) -> float:
    total = 0.0
    for ref, archs in SPACES:
        tunable = load_tunable(ref)
        problem = tunable.default_problems[0]
        for arch in archs:
            space = tunable.space(problem)
            legal = space.enumerate({**problem.context(), **arch_context(arch)}).legal
            start = time.perf_counter()
            report = prune(tunable, problem, legal, arch, analysis_cache=cache_dir, jobs=jobs)
            seconds = time.perf_counter() - start
            total += seconds
            removed = ", ".join(f"{rule} {report.rules[rule].removed}" for rule in RULES)
            print(
                f"  {tunable.name:10s} {problem.label():38s} {arch}: kept {len(report.kept):3d} of {len(legal):3d} "
                f"({removed}); {report.compiled} compiled, {report.cached} cached; {seconds:7.2f} s",
                flush=True,
            )
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=None, help="analysis cache (default: a fresh temporary one)")
    parser.add_argument("--jobs", type=int, default=1, help="compile in this many processes on the cold pass")
    parser.add_argument("--passes", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("TRITON_INTERPRET", "1")  # as on a CPU-only machine: kernels are interpreted
    with tempfile.TemporaryDirectory() as scratch:
        cache_dir = args.cache_dir or Path(scratch)
        for index in range(args.passes):
            print(f"pass {index + 1} (analysis cache {cache_dir}):", flush=True)
            total = one_pass(cache_dir, args.jobs if index == 0 else 1)
            print(f"pass {index + 1}: all five spaces pruned in {total:.2f} s (target for a warm pass: < 60 s)")


if __name__ == "__main__":
    main()
