"""Compile one captured kernel specialization ahead of time for a named GPU target.

No GPU is needed: `triton.compile(ASTSource(...), target=GPUTarget("cuda", cc, 32))` runs the
whole pipeline (TTIR -> TTGIR -> LLIR -> PTX -> cubin with the ptxas that ships in Triton's
wheel). Stage times come from Triton's compilation listener; Triton's own on-disk cache is
bypassed for the call so the times are those of a real compile.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import sys
import threading
from dataclasses import dataclass, field

from .archs import ARCH_LIMITS
from .capture import KernelLaunch, jit_function_for
from .interpreter_state import language_as_compiled

# triton (~0.3 s with its compiler) loads where a kernel is compiled: importing inspect/ imports neither
# torch nor triton (a --bench run of CPU code never needs them).

STAGES = ("ttir", "ttgir", "llir", "ptx", "cubin")
_COMPILE_LOCK = threading.Lock()  # the knobs we set for one compile are process-wide


@dataclass
class CompileOutcome:
    arch: str
    asm: dict = field(default_factory=dict)  # stage -> text (cubin: bytes)
    metadata: dict = field(default_factory=dict)  # Triton's kernel metadata (shared, num_warps, ...)
    compile_ms: dict = field(default_factory=dict)
    ptxas_log: str | None = None
    error: str | None = None
    notes: list = field(default_factory=list)


def _target(arch: str):
    from triton.backends.compiler import GPUTarget

    return GPUTarget("cuda", ARCH_LIMITS[arch].capability, 32)


def ast_source(launch: KernelLaunch):
    from triton.compiler import ASTSource

    return ASTSource(
        fn=launch.jit_function,
        signature=dict(launch.raw_signature),
        constexprs=dict(launch.raw_constexprs),
        attrs=dict(launch.raw_attrs),
    )


def cache_key(launch: KernelLaunch, arch: str, analyser_version: str) -> str:
    """Everything that changes the binary: Triton's own cache key (its version and compiler
    sources, the kernel source and dependencies, signature, constexprs, attributes, options,
    target and ptxas version, cache-invalidating environment), plus our analyser version."""
    import triton
    from triton.compiler import make_backend

    try:
        from triton.runtime.cache import get_cache_key
    except ImportError:  # older layouts keep it in the compiler module
        from triton.compiler.compiler import get_cache_key
    from triton._C.libtriton import get_cache_invalidating_env_vars

    backend = make_backend(_target(arch))
    options = backend.parse_options(dict(launch.options))
    triton_key = get_cache_key(ast_source(launch), backend, options, get_cache_invalidating_env_vars())
    text = f"{analyser_version}|{triton.__version__}|{arch}|{triton_key}"
    return hashlib.sha256(text.encode()).hexdigest()


def compile_for_arch(launch: KernelLaunch, arch: str) -> CompileOutcome:
    """Compile; a compiler failure is returned in `error`, never raised."""
    import triton
    from triton import knobs

    outcome = CompileOutcome(arch=arch)
    stage_times: list = []
    has_listener = hasattr(knobs.compilation, "listener")

    def listener(*, times, **_ignored):
        stage_times.append(times)

    log = io.StringIO()
    with _COMPILE_LOCK, _scope(knobs.compilation), _scope(knobs.nvidia), _scope(knobs.runtime):
        # Some language paths consult the interpreter flag while building IR: compile as on a GPU.
        knobs.runtime.interpret = False
        knobs.compilation.always_compile = True
        if has_listener:
            knobs.compilation.listener = listener
        if hasattr(knobs.nvidia, "dump_ptxas_log"):
            knobs.nvidia.dump_ptxas_log = True  # ptxas -v: spill stores / loads
        try:
            with contextlib.redirect_stdout(log), _compilable_language():
                kernel = triton.compile(ast_source(launch), target=_target(arch), options=dict(launch.options))
        except Exception as error:  # noqa: BLE001 - any compiler failure is a per-target result
            outcome.error = _compiler_message(error)
            return outcome
    outcome.asm = {stage: kernel.asm[stage] for stage in STAGES if stage in kernel.asm}
    outcome.metadata = kernel.metadata._asdict()
    outcome.ptxas_log = log.getvalue() if "spill" in log.getvalue() else None
    if stage_times:
        times = stage_times[-1]
        lowering = dict(times.lowering_stages)
        # Building TTIR from the Python AST happens before the first "lowering" stage.
        lowering["ttir"] = lowering.get("ttir", 0) + times.ir_initialization
        outcome.compile_ms = {stage: round(lowering.get(stage, 0) / 1000.0, 3) for stage in STAGES}
    else:
        outcome.notes.append("this Triton has no compilation listener: per-stage compile times unavailable")
    return outcome


@contextlib.contextmanager
def _compilable_language():
    """triton.language as a GPU process has it, while compiling in an interpreter process.

    Members the interpreter left patched get their real values back (`interpreter_state`), and
    triton.language's own @jit helpers (tl.sum, tl.cdiv, ...), InterpretedFunctions under
    TRITON_INTERPRET=1 that the compiler cannot call, are swapped for JIT twins."""
    with language_as_compiled(), _jit_language_helpers():
        yield


@contextlib.contextmanager
def _jit_language_helpers():
    from triton.runtime.interpreter import InterpretedFunction

    swapped = []
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "triton.language" or name.startswith("triton.language.")):
            continue
        for attribute, value in list(vars(module).items()):
            if isinstance(value, InterpretedFunction):
                swapped.append((module, attribute, value))
                setattr(module, attribute, jit_function_for(value))
    try:
        yield
    finally:
        for module, attribute, value in swapped:
            setattr(module, attribute, value)


def _scope(knob_group):
    """Restore the knobs we set once the compile is done (Triton's own scope when it has one)."""
    scope = getattr(knob_group, "scope", None)
    return scope() if scope else contextlib.nullcontext()


def _compiler_message(error: Exception) -> str:
    text = str(error).strip() or type(error).__name__
    lines = text.splitlines()
    if len(lines) > 40:  # ptxas errors carry the whole PTX; keep the head that explains it
        text = "\n".join(lines[:40] + [f"... ({len(lines) - 40} more lines)"])
    return f"{type(error).__name__}: {text}"
