"""`tesserabench inspect`: analyse a Triton kernel without writing a test.

Two ways to name what to analyse:

  kernel + specialization (no execution at all):
    tesserabench inspect kernels/softmax.py:_softmax_row_kernel \\
        --sig "x_ptr=*fp16,y_ptr=*fp16,n_rows=i32,n_cols=i32,stride_x=i32:16,stride_y=i32:16" \\
        --const BLOCK=1024 --num-warps 8 --arch sm_90,sm_80

  a Python callable run once, every kernel it launches captured (interpreter without a GPU):
    tesserabench inspect kernels.softmax:softmax --args "torch.randn(512, 1024, device=device)"

The registration (done by the top-level `cli.py`) is
    parser = subparsers.add_parser("inspect", help=...); add_arguments(parser)
    ... status = run(args)
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path

from .archs import ACCEPTED_ARCHS, default_archs, parse_archs

# The analysis, capture and summary (~20 modules with subprocess and hashlib, ~20 ms) load where a
# kernel is analysed: `tesserabench inspect --help` stays at ~110 ms, and tuning reads this module's
# loaders without them. torch (~1.2 s, the optional GPU stack) loads only to ask for a GPU and to run
# a call whose launches are captured.

EXIT_OK, EXIT_COMPILE_ERROR, EXIT_USAGE = 0, 1, 2

_SCALAR_TYPES = {"i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "fp64"}
_POINTEE_TYPES = _SCALAR_TYPES | {"fp8e4nv", "fp8e5", "fp8e4b15", "fp8e4b8", "fp8e5b16"}


class UsageError(ValueError):
    """Bad command-line input: printed as one line, exit status 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Compile a Triton kernel ahead of time for GPU targets (no GPU needed) and report "
        "registers, spills, shared memory, occupancy and the instruction mix at every IR level."
    )
    parser.add_argument(
        "target",
        metavar="FILE.py:KERNEL | MODULE:NAME",
        help="a @triton.jit kernel (give --sig/--const) or a Python callable (give --args) "
        "that launches kernels; FILE.py paths and dotted module names both work",
    )
    parser.add_argument(
        "--arch",
        default=None,
        help=f"comma-separated targets from {', '.join(ACCEPTED_ARCHS)} (default: the live GPU, else sm_90)",
    )
    spec = parser.add_argument_group("kernel specialization (when TARGET is a kernel)")
    spec.add_argument(
        "--sig",
        default="",
        metavar="NAME=TYPE,...",
        help="types of the non-constexpr parameters: *fp16, *bf16, *fp32, *i32, i32, i64, "
        "fp32, ...; pointers are taken as 16-byte aligned (as torch allocates), "
        "'i32:16' marks an integer divisible by 16, '*fp16:1' an unaligned pointer",
    )
    spec.add_argument(
        "--const",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a constexpr parameter's value (repeatable, or comma-separated)",
    )
    spec.add_argument("--num-warps", type=int, default=None)
    spec.add_argument("--num-stages", type=int, default=None)
    spec.add_argument("--num-ctas", type=int, default=None)
    spec.add_argument("--maxnreg", type=int, default=None)
    run_group = parser.add_argument_group("capture (when TARGET is a callable)")
    run_group.add_argument(
        "--args",
        default=None,
        metavar="EXPR",
        help="Python expression for the call's arguments, e.g. "
        '"torch.randn(4096, 4096, device=device), dim=-1"; names available: '
        "torch, math, device ('cuda' with a GPU, else 'cpu' under TRITON_INTERPRET=1)",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print the full records as JSON")
    out.add_argument(
        "--dump", metavar="DIR", default=None, help="write ttir, ttgir, llir, ptx, cubin and sass per kernel into DIR"
    )
    out.add_argument("--cache-dir", default=None, help="analysis cache (default: $XDG_CACHE_HOME/tesserabench/inspect)")
    out.add_argument("--no-cache", action="store_true", help="always recompile")


def run(args: argparse.Namespace) -> int:
    from .analysis import analyse_launches
    from .summary import format_kernel_lines

    try:
        archs = parse_archs(args.arch) if args.arch else default_archs()
        launches = _launches(args)
    except (UsageError, ValueError) as error:
        print(f"tesserabench inspect: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if not launches:
        print(f"tesserabench inspect: {args.target} launched no Triton kernel", file=sys.stderr)
        return EXIT_USAGE
    cache = None if args.no_cache else Path(args.cache_dir or _default_cache_dir())
    records = analyse_launches(launches, archs, cache_dir=cache, dump_dir=args.dump)
    if args.json:
        print(json.dumps(records, indent=2, sort_keys=True, default=str))
    else:
        for launch in launches:
            print(launch.describe() + (f"  (autotuned: {launch.config})" if launch.config else ""))
        for line in format_kernel_lines(records):
            print("  " + line)
        if args.dump:
            print(f"IR written under {args.dump}/<kernel>/<kernel>-<spec>-<arch>.<ttir|ttgir|llir|ptx|cubin|sass>")
    return EXIT_COMPILE_ERROR if any(record.get("error") for record in records) else EXIT_OK


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tesserabench" / "inspect"


def _gpu_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:
        return False


def _launches(args):
    if ":" not in args.target:
        raise UsageError(f"target {args.target!r} must be FILE.py:NAME or MODULE:NAME")
    if args.args is not None and not _gpu_available():
        # Kernels must be decorated in interpreter mode, so set it before importing them.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    obj = load_object(args.target)
    if _is_triton_kernel(obj):
        if args.args is not None:
            raise UsageError(
                f"{args.target} is a kernel: describe it with --sig/--const, "
                "or point at the Python function that launches it to use --args"
            )
        return [
            launch_from_spec(
                obj,
                args.sig,
                _split_consts(args.const),
                num_warps=args.num_warps,
                num_stages=args.num_stages,
                num_ctas=args.num_ctas,
                maxnreg=args.maxnreg,
            )
        ]
    if not callable(obj):
        raise UsageError(f"{args.target} is neither a Triton kernel nor callable")
    if args.sig or args.const:
        raise UsageError(
            f"{args.target} is not a Triton kernel: --sig/--const describe kernels; "
            "give the call's arguments with --args"
        )
    return capture_call(obj, args.args or "")


def load_object(target: str, *, kind: tuple[type, ...] = (), what: str = "names"):
    """'kernels/softmax.py:_kernel' or 'kernels.softmax:softmax' -> the object. A name the module
    lacks is an error listing the module's objects of ``kind`` (its ``what``), else all its names."""
    location, _, attribute = target.rpartition(":")
    if not location or not attribute:
        raise UsageError(f"target {target!r} must be FILE.py:NAME or MODULE:NAME")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # so kernels' own `from kernels import ...` works
    try:
        module = _import_location(location)
    except (ImportError, SyntaxError) as error:
        raise UsageError(f"cannot import {location!r}: {error}") from error
    obj = module
    for part in attribute.split("."):
        if not hasattr(obj, part):
            known = sorted(name for name in dir(module) if not name.startswith("__"))
            of_kind = [name for name in known if kind and isinstance(getattr(module, name, None), kind)]
            listed = f"its {what}: {', '.join(of_kind)}" if of_kind else f"it defines: {', '.join(known)}"
            raise UsageError(f"{location} has no {attribute!r}; {listed[:400]}")
        obj = getattr(obj, part)
    return obj


def _import_location(location: str):
    if location.endswith(".py"):
        path = Path(location).resolve()
        if not path.is_file():
            raise ImportError(f"no such file: {location}")
        try:  # inside the working directory: import as a package module (relative imports work)
            dotted = ".".join(path.relative_to(Path.cwd()).with_suffix("").parts)
            return importlib.import_module(dotted)
        except (ValueError, ImportError):
            spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = module
            spec.loader.exec_module(module)
            return module
    return importlib.import_module(location)


def _is_triton_kernel(obj) -> bool:
    from .capture import jit_function_for

    try:
        jit_function_for(obj)
    except TypeError:
        return False
    return True


def _split_consts(values: list[str]) -> dict:
    consts = {}
    for value in values:
        for item in filter(None, (part.strip() for part in value.split(","))):
            name, equals, text = item.partition("=")
            if not equals or not name.strip():
                raise UsageError(f"--const {item!r}: expected NAME=VALUE, e.g. --const BLOCK=1024")
            consts[name.strip()] = _literal(text.strip())
    return consts


def _literal(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a bare word: a string constexpr


def launch_from_spec(kernel, sig: str, consts: dict, *, num_warps=None, num_stages=None, num_ctas=None, maxnreg=None):
    """A KernelLaunch for `kernel` from a textual signature and constexpr values."""
    from .capture import KernelLaunch, jit_function_for

    jit_fn = jit_function_for(kernel)
    params = list(jit_fn.params)
    names = [param.name for param in params]
    types: dict[str, tuple[str, bool]] = {}
    for item in filter(None, (part.strip() for part in sig.split(","))):
        name, equals, text = item.partition("=")
        name, text = name.strip(), text.strip()
        if not equals or name not in names:
            raise UsageError(f"--sig entry {item!r}: expected NAME=TYPE with NAME one of {', '.join(names)}")
        types[name] = _parse_type(name, text)
    unknown = sorted(set(consts) - set(names))
    if unknown:
        raise UsageError(
            f"--const names {', '.join(unknown)} are not parameters of {jit_fn.__name__} ({', '.join(names)})"
        )
    signature, constexprs, attrs = {}, {}, {}
    missing_types, missing_consts = [], []
    for index, param in enumerate(params):
        if param.is_constexpr or param.name in consts:
            if param.name in consts:
                constexprs[(index,)] = consts[param.name]
            elif param.has_default:
                constexprs[(index,)] = param.default
            else:
                missing_consts.append(param.name)
            signature[param.name] = "constexpr"
        elif param.name in types:
            signature[param.name], divisible = types[param.name]
            if divisible:
                attrs[(index,)] = [["tt.divisibility", 16]]
        else:
            missing_types.append(param.name)
    if missing_types:
        example = ",".join(f"{n}={_example_type(n)}" for n in missing_types[:3])
        raise UsageError(
            f'--sig lacks the types of {", ".join(missing_types)} (e.g. --sig "{example}"; *T is a pointer '
            "to T, :16 says the value is divisible by 16, as Triton specialises it)"
        )
    if missing_consts:
        raise UsageError(
            f"--const lacks values for the constexpr parameters {', '.join(missing_consts)} "
            f"(e.g. --const {missing_consts[0]}=128)"
        )
    options = {
        key: value
        for key, value in (
            ("num_warps", num_warps),
            ("num_stages", num_stages),
            ("num_ctas", num_ctas),
            ("maxnreg", maxnreg),
        )
        if value is not None
    }
    fn = jit_fn.fn
    return KernelLaunch(
        name=fn.__name__,
        source=f"{fn.__module__}:{fn.__qualname__}",
        signature=signature,
        constexprs={names[path[0]]: value for path, value in constexprs.items()},
        num_warps=num_warps or 4,
        num_stages=num_stages or 3,
        num_ctas=num_ctas or 1,
        options=options,
        config=None,
        interpreted=False,
        compiled=None,
        jit_function=jit_fn,
        raw_signature=dict(signature),
        raw_constexprs=constexprs,
        raw_attrs=attrs,
    )


def _parse_type(name: str, text: str) -> tuple[str, bool]:
    base, _, modifier = text.partition(":")
    base = base.strip()
    pointee = base[1:] if base.startswith("*") else None
    if (pointee is not None and pointee not in _POINTEE_TYPES) or (pointee is None and base not in _SCALAR_TYPES):
        raise UsageError(
            f"--sig {name}={text}: unknown type {base!r}; use *fp16, *bf16, *fp32, *i32, "
            f"i32, i64, fp32, ... (pointers start with '*')"
        )
    if modifier not in ("", "1", "16"):
        raise UsageError(f"--sig {name}={text}: the only modifiers are ':16' (divisible by 16) and ':1' (not)")
    divisible = modifier == "16" or (pointee is not None and modifier == "")
    return base, divisible


def capture_call(function, args_text: str):
    from .capture import capture_launches

    namespace = {"math": __import__("math"), "device": "cuda" if _gpu_available() else "cpu"}
    try:
        import torch

        namespace["torch"] = torch
    except ImportError:
        pass
    try:
        call_args, call_kwargs = eval(f"(lambda *a, **k: (a, k))({args_text})", namespace)  # noqa: S307
    except Exception as error:  # noqa: BLE001 - the user's expression: report it, do not crash
        raise UsageError(f"--args {args_text!r} could not be evaluated: {type(error).__name__}: {error}") from error
    with capture_launches() as launches:
        function(*call_args, **call_kwargs)
    return launches


def _example_type(name: str) -> str:
    """A plausible type for a parameter's name: pointers are usually named so."""
    lowered = name.lower()
    pointer = lowered.endswith("ptr") or lowered.startswith("ptr") or (len(name) == 1 and name.isupper())
    return "*fp16" if pointer else "i32:16"
