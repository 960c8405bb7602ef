"""Issue 14's GPU target: the tuner with static pruning against exhaustive search and against
Triton's own autotune, on the project's matmul at 4096^3 bf16: the kernel matmul() runs on the
GPU at hand (on Hopper the TMA persistent kernel, kernels.matmul:TUNABLE_TMA; elsewhere the
pointer kernel, kernels.matmul:TUNABLE).

    python benchmarks/tune_matmul_gpu.py            # on a GPU machine; one command

Target: the tuner's config is within 3% of exhaustive search's best, in at most 30% of
exhaustive search's GPU time.

Phases, each in a fresh process with an empty Triton cache (so each pays its own JIT
compiles, as a tuning on a new machine would):
  exhaustive  every config the space's constraints allow, timed (CUDA events, L2 flushed);
  tuner       static pruning (AOT compiles on the CPU, analysis cache; not GPU time) then the
              strategy (Bayesian by default; random when Optuna is missing) with a budget;
  triton      @triton.autotune over the same configs (its do_bench), first call timed;
  compare     the three winners re-measured in alternation in one process (the fair "within 3%").
GPU time of a phase = the wall time of its timing work on the GPU machine: JIT compiles, warm-up,
measurement, and for the tuner its significance re-measurements. Each phase writes
RESULTS/<phase>.json; a re-run skips phases already done (--fresh starts over), so a session
with a per-command time limit can run it several times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PHASES = ("exhaustive", "tuner", "triton", "compare")


def _setup(args):
    """(tunable, problem, arch, legal configs, device): the kernel matmul() runs on this GPU,
    the TMA persistent one on Hopper, the pointer one elsewhere."""
    import torch

    from kernels import matmul
    from pytest_tesserabench.inspect.archs import arch_from_capability
    from pytest_tesserabench.tuning.tunable import load_tunable
    from pytest_tesserabench.tuning.tuner import arch_context

    arch = arch_from_capability(*torch.cuda.get_device_capability())
    hopper = arch == "sm_90" and matmul.TensorDescriptor is not None
    # By reference, so static pruning's worker processes can import it.
    tunable = load_tunable("kernels.matmul:TUNABLE_TMA" if hopper else "kernels.matmul:TUNABLE")
    problem = tunable.problem({"M": args.M, "N": args.N, "K": args.K}, (args.dtype,))
    legal = tunable.space(problem).enumerate({**problem.context(), **arch_context(arch)}).legal
    return tunable, problem, arch, legal, torch.device("cuda")


def phase_exhaustive(args) -> dict:
    from pytest_tesserabench.tuning.measure import Evaluator, gpu_timer_factory

    tunable, problem, arch, legal, device = _setup(args)
    evaluator = Evaluator(gpu_timer_factory(tunable.runner(problem, device), device))
    trials = [evaluator(config) for config in legal]
    timed = sorted((t for t in trials if t.ok), key=lambda t: t.median_ms)
    return {
        "configs": len(legal),
        "timed": len(trials),
        "failed": sum(not t.ok for t in trials),
        "gpu_seconds": evaluator.seconds,
        "best": timed[0].config.to_json(),
        "best_ms": timed[0].median_ms,
        "arch": arch,
        "kernel": tunable.name,
    }


def phase_tuner(args) -> dict:
    from pytest_tesserabench.tuning.cache import TuningCache
    from pytest_tesserabench.tuning.measure import gpu_timer_factory
    from pytest_tesserabench.tuning.pruning import worker_count
    from pytest_tesserabench.tuning.strategies import StrategyError, check_strategy
    from pytest_tesserabench.tuning.tuner import tune

    tunable, problem, arch, legal, device = _setup(args)
    strategy = args.strategy
    try:
        check_strategy(strategy)
    except StrategyError as error:
        print(f"tune_matmul_gpu: {error}; using random search", file=sys.stderr)
        strategy = "random"
    timer_factory = gpu_timer_factory(tunable.runner(problem, device), device)
    start = time.perf_counter()
    result = tune(
        tunable,
        problem,
        arch,
        strategy=strategy,
        budget=args.budget,
        seed=args.seed,
        analysis_cache=args.results / "analysis-cache",
        jobs=worker_count(args.jobs),
        timer_factory=timer_factory,
        cache=TuningCache(args.results / "tuning_cache.json"),
        device_name=__import__("torch").cuda.get_device_name(),
    )
    print("\n".join(result.lines()), file=sys.stderr)
    return {
        "strategy": strategy,
        "configs": len(legal),
        "candidates": len(result.ranking),
        "timed": len(result.trials),
        "gpu_seconds": result.search_seconds,
        "wall_seconds": time.perf_counter() - start,
        "prune_seconds": result.prune.seconds,
        "prune_compiled": result.prune.compiled,
        "prune_cached": result.prune.cached,
        "pruned": {rule: stats.removed for rule, stats in result.prune.rules.items()},
        "best": result.best.to_json(),
        "best_ms": result.best_ms,
        "significance": result.significance.to_json() if result.significance else None,
    }


def phase_triton(args) -> dict:
    """@triton.autotune over the same configs, as a user of Triton would write it."""
    import torch
    import triton

    from kernels import matmul

    tunable, problem, arch, legal, device = _setup(args)
    tma = tunable.name == "matmul_tma"
    hook = matmul._tma_set_block_shapes if tma else None
    configs = [
        triton.Config(c.kernel_kwargs, num_warps=c["num_warps"], num_stages=c["num_stages"], pre_hook=hook)
        for c in legal
    ]
    M, N, K = args.M, args.N, args.K
    dtype = getattr(torch, {"bf16": "bfloat16", "fp16": "float16"}[args.dtype])
    a = torch.randn(M, K, device=device).to(dtype)
    b = torch.randn(K, N, device=device).to(dtype)
    c = torch.empty(M, N, device=device, dtype=dtype)
    if tma:
        kernel = triton.autotune(configs=configs, key=["M", "N", "K"])(matmul._matmul_kernel_tma_persistent.fn)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        descriptors = [matmul.TensorDescriptor.from_tensor(t, [16, 16]) for t in (a, b, c)]
        grid = lambda meta: (min(sms, triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"])),)  # noqa: E731
        extra = dict(HAS_SCALES=False, B_K_MAJOR=False, NUM_SMS=sms)
        arguments = (*descriptors, c, c, M, N, K)
    else:
        kernel = triton.autotune(configs=configs, key=["M", "N", "K"])(matmul._matmul_kernel.fn)
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)  # noqa: E731
        extra = dict(HAS_SCALES=False, ALLOW_TF32=False)
        arguments = (a, b, c, c, c, M, N, K, K, 1, N, 1, N, 1)
    torch.cuda.synchronize()
    start = time.perf_counter()
    kernel[grid](*arguments, **extra)  # the first call tunes: compiles and times every config
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    best = kernel.best_config
    return {
        "configs": len(configs),
        "gpu_seconds": seconds,
        "best": {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages},
    }


def phase_compare(args) -> dict:
    from pytest_tesserabench.tuning.measure import Evaluator, gpu_timer_factory
    from pytest_tesserabench.tuning.space import Config

    tunable, problem, arch, legal, device = _setup(args)
    winners = {name: Config(_load(args, name)["best"]) for name in ("exhaustive", "tuner", "triton")}
    evaluator = Evaluator(gpu_timer_factory(tunable.runner(problem, device), device))
    rounds = {name: [] for name in winners}
    for config in winners.values():
        evaluator(config)  # JIT compile and warm up outside the comparison
    for _ in range(args.compare_runs):  # alternating: drift hits all three alike
        for name, config in winners.items():
            rounds[name].extend(evaluator.remeasure(config))
    import statistics

    return {name: statistics.median(values) for name, values in rounds.items()}


def _load(args, phase: str) -> dict:
    return json.loads((args.results / f"{phase}.json").read_text())


def _run_phase(args, phase: str) -> None:
    """The phase in a fresh process with an empty Triton cache."""
    with tempfile.TemporaryDirectory() as triton_cache:
        env = {**os.environ, "TRITON_CACHE_DIR": triton_cache}
        command = [sys.executable, __file__, "--phase", phase, *args.passthrough]
        print(f"tune_matmul_gpu: running phase {phase} ...", file=sys.stderr, flush=True)
        subprocess.run(command, env=env, check=True)


def report(args) -> None:
    import torch
    import triton

    exhaustive, tuner, autotune, compare = (_load(args, phase) for phase in PHASES)
    best = compare["exhaustive"]
    print(
        f"{exhaustive['kernel']} {args.M}x{args.N}x{args.K} {args.dtype} on {torch.cuda.get_device_name()} "
        f"({exhaustive['arch']}), "
        f"Triton {triton.__version__}, torch {torch.__version__}"
    )
    rows = [
        ("exhaustive (every legal config)", f"{exhaustive['timed']}", exhaustive["gpu_seconds"], "exhaustive"),
        (
            f"tuner (static pruning + {tuner['strategy']})",
            f"{tuner['timed']} of {tuner['candidates']} kept",
            tuner["gpu_seconds"],
            "tuner",
        ),
        ("triton.autotune (same configs)", f"{autotune['configs']}", autotune["gpu_seconds"], "triton"),
    ]
    print(f"{'method':42s} {'configs timed':>20s} {'GPU s':>8s} {'share':>6s} {'median ms':>10s} {'vs exh.':>8s}")
    for label, timed, seconds, name in rows:
        print(
            f"{label:42s} {timed:>20s} {seconds:8.1f} {seconds / exhaustive['gpu_seconds']:6.0%} "
            f"{compare[name]:10.4f} {compare[name] / best:8.3f}"
        )
    for _, _, _, name in rows:
        print(f"  {name} best: {_load(args, name)['best']}")
    print(
        f"static pruning (AOT compiles on the CPU, not counted as GPU time): {tuner['candidates']} of "
        f"{tuner['configs']} kept, removed {tuner['pruned']}, {tuner['prune_seconds']:.1f} s "
        f"({tuner['prune_compiled']} compiled, {tuner['prune_cached']} cached); the tuner's wall time with it: "
        f"{tuner['wall_seconds']:.1f} s ({tuner['wall_seconds'] / exhaustive['gpu_seconds']:.0%} of exhaustive's)"
    )
    within = compare["tuner"] / best <= 1.03
    share = tuner["gpu_seconds"] / exhaustive["gpu_seconds"]
    print(
        f"target: within 3% of exhaustive's best: {'yes' if within else 'NO'} ({compare['tuner'] / best:.3f}); "
        f"<= 30% of its GPU time: {'yes' if share <= 0.30 else 'NO'} ({share:.0%})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--M", type=int, default=4096)
    parser.add_argument("--N", type=int, default=4096)
    parser.add_argument("--K", type=int, default=4096)
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    parser.add_argument("--strategy", default="bayesian")
    parser.add_argument(
        "--budget", type=float, default=0.2, help="configs to time: a share of the pruned candidates (0.2) or a count"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=0, help="AOT compile processes (0: one per CPU)")
    parser.add_argument("--compare-runs", type=int, default=5)
    parser.add_argument("--results", type=Path, default=ROOT / ".bench-out" / "tune_matmul_gpu")
    parser.add_argument("--fresh", action="store_true", help="forget earlier phases' results")
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.passthrough = [a for a in sys.argv[1:] if a != "--fresh"]
    if args.budget >= 1:
        args.budget = int(args.budget)  # a count of configs; below 1 a share of the candidates
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    import torch

    if not torch.cuda.is_available():
        sys.exit("tune_matmul_gpu: no CUDA GPU here; run it on a GPU machine (static pruning alone: tune_prune_cpu.py)")
    args.results.mkdir(parents=True, exist_ok=True)
    if args.phase:
        result = globals()[f"phase_{args.phase}"](args)
        (args.results / f"{args.phase}.json").write_text(json.dumps(result, indent=2, sort_keys=True))
        return
    for phase in PHASES:
        done = args.results / f"{phase}.json"
        if args.fresh or not done.exists():
            _run_phase(args, phase)
    report(args)


if __name__ == "__main__":
    main()
