"""`tesserabench tune`: tune a kernel's configs, or list what the tuning cache holds.

    tesserabench tune kernels.matmul:TUNABLE --shape M=4096,N=4096,K=4096 --dtype bf16 \\
        --strategy bayesian --budget 25%            # on a GPU: measured, written to the cache
    tesserabench tune kernels.attention:TUNABLE --arch sm_90,sm_80
                                                    # no GPU: pruned and ranked by an ESTIMATE
    tesserabench tune --show                        # what tuning_cache.json holds

Exit status: 0 done; 1 a problem had no config left (every config removed by static pruning,
or every timed one failed): what CI checks; 2 a usage error (bad space, shape, strategy...).

The registration (done by the top-level `cli.py`): `main(argv)` gets every argument after `tune`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import warnings
from pathlib import Path

from pytest_tesserabench.options import parse_percent
from pytest_tesserabench.record import files
from pytest_tesserabench.record.units import format_ms

from . import measure
from .space import SpaceError
from .strategies import STRATEGIES, StrategyError, check_strategy

# What tuning needs beyond the parser loads where a command runs: the tuner, static pruning and the
# analysis it compiles with, the cache, the tunable and the arch table (~90 modules with
# multiprocessing and logging, ~70 ms) would take `tesserabench tune --help` from ~115 ms to
# ~185 ms; torch (~1.2 s, the optional GPU stack) only where a GPU may time the configs.

EXIT_OK, EXIT_NOTHING_LEFT, EXIT_USAGE = 0, 1, 2


def _budget(text: str) -> int | float:
    text = text.strip()
    try:
        if text.endswith("%"):
            value = parse_percent(text, allow_zero=False, high=100.0)
            return 1.0 if value >= 1.0 else value
        count = int(text)
        if count < 1:
            raise ValueError
        return count
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"budget {text!r}: give a number of configs to time (40) or a share of the candidates (25%)"
        ) from None


def _occupancy(text: str) -> float:
    try:
        return parse_percent(text, high=100.0)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"min occupancy {text!r} {error}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tesserabench tune",
        description="Tune a Triton kernel's configs: constraints, static pruning (compiled for the target, "
        "no GPU needed), a search timed on the GPU, and a persistent cache the kernels consult. Without a "
        "GPU, configs are pruned and ranked by a static ESTIMATE.",
    )
    parser.add_argument(
        "tunable",
        nargs="?",
        metavar="MODULE:NAME",
        help="a Tunable a kernel module declares, e.g. kernels.matmul:TUNABLE (FILE.py:NAME works too)",
    )
    parser.add_argument("--show", action="store_true", help="list the tuning cache's entries and exit")
    parser.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=N,...",
        help="a problem's sizes, e.g. M=4096,N=4096,K=4096 (repeatable; default: the tunable's own problems)",
    )
    parser.add_argument("--dtype", default=None, help="operand dtype: fp16, bf16, ... (default: the tunable's first)")
    parser.add_argument(
        "--arch", default=None, help="comma-separated targets, e.g. sm_90,sm_80 (default: the live GPU, else sm_90)"
    )
    search = parser.add_argument_group("search (timed on the GPU)")
    search.add_argument("--strategy", default="exhaustive", choices=STRATEGIES, help="default exhaustive")
    search.add_argument(
        "--budget",
        type=_budget,
        default=None,
        help="configs to time: a count (40) or a share of the candidates "
        "(25%%); default a quarter, at least 8; exhaustive times them all",
    )
    search.add_argument("--seed", type=int, default=0, help="seed of the random, Bayesian and genetic searches")
    search.add_argument(
        "--max-time", type=float, default=None, metavar="S", help="measuring time per config (default 0.1 s)"
    )
    search.add_argument(
        "--confirm-runs",
        type=int,
        default=3,
        metavar="N",
        help="re-measure the best and the runner-up N times each, alternating, for the gate's "
        "significance test (0: skip)",
    )
    search.add_argument("--static", action="store_true", help="do not time, even on a GPU: rank by the static estimate")
    pruning = parser.add_argument_group("static pruning")
    pruning.add_argument(
        "--no-prune", action="store_true", help="time every legal config without compiling first (GPU only)"
    )
    pruning.add_argument(
        "--min-occupancy",
        type=_occupancy,
        default=None,
        metavar="PCT",
        help="occupancy floor (default: one warp per scheduler, 6.25%% on sm_80/sm_90; 0 turns the rule off)",
    )
    pruning.add_argument("--allow-spills", action="store_true", help="keep configs that spill registers")
    pruning.add_argument("--jobs", type=int, default=1, metavar="N", help="compile in N processes (0: one per CPU)")
    pruning.add_argument(
        "--analysis-cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="the static analysis cache (default: $XDG_CACHE_HOME/tesserabench/inspect)",
    )
    output = parser.add_argument_group("output")
    output.add_argument(
        "--cache",
        type=Path,
        default=None,
        metavar="PATH",
        help="the tuning cache (default: $TESSERABENCH_TUNING_CACHE, else ./tuning_cache.json)",
    )
    output.add_argument("--json", default=None, metavar="PATH", help="write every result as JSON ('-': stdout)")
    output.add_argument("--top", type=int, default=5, help="configs listed per result (default 5)")
    return parser


def main(argv: list[str], out=None, err=None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_OK
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            status = _show(args, out) if args.show else _tune(args, out, err)
        except UsageError as error:
            print(f"tesserabench tune: error: {error}", file=err)
            status = EXIT_USAGE
        except (OSError, TimeoutError) as error:  # the cache file or its lock, after the checks
            print(f"tesserabench tune: error: {error}", file=err)
            status = EXIT_USAGE
    for warning in caught:
        if warning.category.__name__ == "TuningCacheWarning":
            print(f"tesserabench tune: warning: {warning.message}", file=err)
    return status


class UsageError(ValueError):
    pass


def _problems(tunable, args):
    from .tunable import parse_shape

    if not args.shape:
        if args.dtype is None:
            return list(tunable.default_problems) or _no_default(tunable)
        return [tunable.problem(p.shape, (args.dtype,)) for p in tunable.default_problems] or _no_default(tunable)
    dtype = args.dtype or (tunable.default_problems[0].dtypes[0] if tunable.default_problems else tunable.dtypes[0])
    return [tunable.problem(parse_shape(text), (dtype,)) for text in args.shape]


def _no_default(tunable):
    raise UsageError(f"{tunable.name} declares no default problem; give one with --shape")


def _live_gpu():
    """(arch, device name) of the GPU this process can time on, or None."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    from pytest_tesserabench.inspect.archs import arch_from_capability

    return arch_from_capability(*torch.cuda.get_device_capability()), torch.cuda.get_device_name()


def _tune(args, out, err) -> int:
    from .cache import TuningCache
    from .pruning import PruneRules, default_analysis_cache, worker_count
    from .tunable import TunableError
    from .tuner import TuningError, tune

    tunable, problems, archs = _what_to_tune(args)
    live = _live_gpu()
    measured_archs = _measured_archs(args, tunable, archs, live, out)
    cache = TuningCache(args.cache)
    _check_outputs(args, cache if measured_archs else None)  # before minutes of compiling, not after
    rules = PruneRules(spills=not args.allow_spills, min_occupancy=args.min_occupancy)
    measure_budget = (
        measure.TUNING_BUDGET
        if args.max_time is None
        else dataclasses.replace(measure.TUNING_BUDGET, max_time=args.max_time)
    )
    results, status = [], EXIT_OK
    for problem in problems:
        runner = None
        for arch in archs:
            timer_factory = None
            if arch in measured_archs:
                import torch

                runner = runner or tunable.runner(problem, torch.device("cuda"))
                timer_factory = measure.gpu_timer_factory(runner, torch.device("cuda"))
            try:
                result = tune(
                    tunable,
                    problem,
                    arch,
                    strategy=args.strategy,
                    budget=args.budget,
                    seed=args.seed,
                    static_pruning=not args.no_prune,
                    rules=rules,
                    analysis_cache=args.analysis_cache or default_analysis_cache(),
                    jobs=worker_count(args.jobs),
                    timer_factory=timer_factory,
                    measure_budget=measure_budget,
                    confirm_runs=args.confirm_runs,
                    cache=cache if timer_factory is not None else None,
                    device_name=live[1] if live and timer_factory is not None else None,
                )
            except (SpaceError, StrategyError, TunableError) as error:
                raise UsageError(f"{tunable.name} {problem.label()} on {arch}: {error}") from None
            except TuningError as error:
                print(f"tesserabench tune: {error}", file=err)
                status = EXIT_NOTHING_LEFT
                continue
            results.append(result)
            print("\n".join(result.lines(top=args.top)), file=out)
    if args.json:
        document = [result.to_json() for result in results]
        if args.json == "-":
            print(json.dumps(document, indent=2, sort_keys=True), file=out)
        else:
            files.write_json(Path(args.json), document)
    return status


def _what_to_tune(args):
    """(the tunable, its problems, the archs) the command line names; UsageError otherwise."""
    from pytest_tesserabench.inspect.archs import default_archs, parse_archs

    from .tunable import TunableError, load_tunable

    if not args.tunable:
        raise UsageError("name the tunable (e.g. tesserabench tune kernels.matmul:TUNABLE) or pass --show")
    if args.max_time is not None and not args.max_time > 0:
        raise UsageError(f"--max-time {args.max_time}: must be a positive number of seconds")
    try:
        tunable = load_tunable(args.tunable)
        return tunable, _problems(tunable, args), parse_archs(args.arch) if args.arch else default_archs()
    except (TunableError, ValueError) as error:
        raise UsageError(str(error)) from None


def _measured_archs(args, tunable, archs, live, out) -> set[str]:
    """The archs timed on the GPU here (its own, unless --static); the others are ranked by the
    static estimate, which is said once, with what of the command line does not apply there."""

    measured = set()
    if live and not args.static and tunable.runner is not None:
        measured = {live[0]}
        try:
            check_strategy(args.strategy)
        except StrategyError as error:
            raise UsageError(str(error)) from None
    static_archs = [arch for arch in archs if arch not in measured]
    if args.no_prune and static_archs:
        raise UsageError(
            f"--no-prune needs a GPU of the target architecture: without one ({', '.join(static_archs)}) the "
            "ranking comes from the compiled configs"
        )
    if static_archs:
        why = "--static" if args.static else ("no GPU here" if not live else f"the GPU here is {live[0]}")
        unused = f" (--strategy {args.strategy} and --budget choose what is timed: not used there)"
        print(
            f"{why}: {', '.join(static_archs)} configs are pruned and RANKED BY A STATIC ESTIMATE, not measured; "
            "nothing is written to the tuning cache" + (unused if args.strategy != "exhaustive" else ""),
            file=out,
        )
    return measured


def _check_outputs(args, cache) -> None:
    """--json and (when something is measured) the tuning cache are writable; UsageError otherwise."""

    outputs = [("--json", Path(args.json))] if args.json not in (None, "-") else []
    if cache is not None:
        outputs.append(("--cache", cache.path))
    for option, path in outputs:
        problem = files.check_writable_file(path)
        if problem:
            raise UsageError(f"{option} {path} {problem}")


def _show(args, out) -> int:
    from .cache import TuningCache, kernel_source_hash
    from .tunable import load_tunable

    cache = TuningCache(args.cache)
    entries = cache.load()
    if not entries:
        print(f"{cache.path}: no tuned configs" + ("" if cache.path.exists() else " (no such file yet)"), file=out)
        return EXIT_OK
    hashes: dict[str, str | None] = {}

    def current(entry) -> str:
        ref = entry.get("tunable")
        if ref not in hashes:
            try:
                hashes[ref] = kernel_source_hash(load_tunable(ref).kernel()) if ref else None
            except Exception:  # noqa: BLE001 - a kernel that no longer imports: staleness unknown
                hashes[ref] = None
        if hashes[ref] is None:
            return "?"
        return "current" if hashes[ref] == entry["source_hash"] else "STALE (kernel source changed)"

    print(f"{cache.path}: {len(entries)} tuned config{'s' if len(entries) != 1 else ''}", file=out)
    for key in sorted(entries):
        entry = entries[key]
        median = entry.get("median_ms")
        config = " ".join(f"{k}={v}" for k, v in entry["config"].items())
        print(f"  {key}", file=out)
        print(
            f"    {config}  {'?' if median is None else format_ms(median)}  {entry.get('method', '?')}"
            f" ({entry.get('strategy') or '-'}, {entry.get('timed', '?')} timed) on {entry.get('device') or '?'}"
            f", {entry.get('tuned_at', '?')}; source {current(entry)}",
            file=out,
        )
    return EXIT_OK


__all__ = ["build_parser", "main"]
