"""Record every Triton kernel launch made inside a `with capture_launches():` block.

Entering the first capture patches `JITFunction.run`, `InterpretedFunction.run` and the
autotuner; leaving the last one restores them, so nothing is paid when no capture is active.
Launches are recorded for the thread that opened the capture, de-duplicated by
specialization (a kernel launched 1000 times with the same types, constexprs and options is
one entry). The specialization is computed with Triton's own binder for a CUDA backend, so
an interpreted launch on the CPU gets the same signature, divisibility attributes and
options the JIT would use on a GPU.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

# triton (~0.3 s with its runtime) is imported where a launch is patched or specialized: --bench reaches
# this module only once a test loaded triton, but KernelLaunch and the package import without it.

# Options a launch may carry that change the binary; everything else is a kernel argument.
_SPEC_TARGET_CAPABILITY = 90


@dataclass(eq=False)
class KernelLaunch:
    """One distinct specialization of a Triton kernel that was launched."""

    name: str
    source: str  # "module:qualname" of the kernel function
    signature: dict[str, str]  # every parameter -> Triton type ("*fp16", "i32", "constexpr")
    constexprs: dict[str, Any]  # parameter name -> value (includes ints specialized to 1)
    num_warps: int
    num_stages: int
    num_ctas: int
    options: dict[str, Any]  # compile options given at launch (num_warps, maxnreg, ...)
    config: dict[str, Any] | None  # the autotuner's chosen kwargs, None without autotuning
    interpreted: bool
    compiled: Any = None  # GPU: the CompiledKernel that ran
    # What Triton's compiler needs to rebuild it: the JITFunction and raw specialization.
    jit_function: Any = field(default=None, repr=False)
    raw_signature: dict = field(default_factory=dict, repr=False)
    raw_constexprs: dict = field(default_factory=dict, repr=False)
    raw_attrs: dict = field(default_factory=dict, repr=False)

    @property
    def typed_signature(self) -> dict[str, str]:
        """The signature as `tesserabench inspect --sig` takes it: an integer or pointer Triton
        specialised as divisible by 16 reads ``i32:16`` / ``*fp16:16``."""
        names = list(self.signature)
        typed = dict(self.signature)
        for path, attributes in self.raw_attrs.items():
            index = path[0] if isinstance(path, tuple) and len(path) == 1 else None
            if index is None or index >= len(names):
                continue
            for attribute in attributes or ():
                if list(attribute)[:2] == ["tt.divisibility", 16] and ":" not in typed[names[index]]:
                    typed[names[index]] += ":16"
        return typed

    def describe(self) -> str:
        consts = ", ".join(f"{k}={v}" for k, v in self.constexprs.items())
        return f"{self.name}[{consts}] warps={self.num_warps} stages={self.num_stages}"


class _Recorder:
    def __init__(self) -> None:
        self.launches: list[KernelLaunch] = []
        self._seen: set = set()

    def add(self, key, make_launch) -> None:
        if key not in self._seen:
            self._seen.add(key)
            self.launches.append(make_launch())


class _LaunchPatcher:
    """Owns the patches: installed while at least one capture is open in any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._originals: list[tuple[type, str, Any]] = []
        self._local = threading.local()
        self._jit_twins: dict = {}
        self._binders: dict = {}
        self._backend = None

    # per-thread state -------------------------------------------------------------------
    def _state(self):
        local = self._local
        if not hasattr(local, "recorders"):
            local.recorders, local.autotuners, local.suppressed = [], [], 0
        return local

    def open(self) -> _Recorder:
        recorder = _Recorder()
        with self._lock:
            if self._users == 0:
                self._install()
            self._users += 1
        self._state().recorders.append(recorder)
        return recorder

    def close(self, recorder: _Recorder) -> None:
        self._state().recorders.remove(recorder)
        with self._lock:
            self._users -= 1
            if self._users == 0:
                self._uninstall()

    # patching ---------------------------------------------------------------------------
    def _install(self) -> None:
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        patcher = self

        def patch(cls, name, make_wrapper):
            original = cls.__dict__[name]
            self._originals.append((cls, name, original))
            setattr(cls, name, make_wrapper(original))

        def wrap_launch(interpreted):
            def make(original):
                def run(kernel, *args, grid, warmup, **kwargs):
                    result = original(kernel, *args, grid=grid, warmup=warmup, **kwargs)
                    if not warmup:
                        patcher._on_launch(kernel, args, kwargs, interpreted, result)
                    return result

                return run

            return make

        def wrap_autotuner_run(original):
            def run(tuner, *args, **kwargs):
                state = patcher._state()
                state.autotuners.append(tuner)
                try:
                    return original(tuner, *args, **kwargs)
                finally:
                    state.autotuners.pop()

            return run

        def wrap_autotuner_bench(original):
            # Benchmarking candidate configs is not "the kernel that ran": ignore those launches.
            def _bench(tuner, *args, **kwargs):
                state = patcher._state()
                state.suppressed += 1
                try:
                    return original(tuner, *args, **kwargs)
                finally:
                    state.suppressed -= 1

            return _bench

        patch(JITFunction, "run", wrap_launch(interpreted=False))
        patch(InterpretedFunction, "run", wrap_launch(interpreted=True))
        patch(Autotuner, "run", wrap_autotuner_run)
        patch(Autotuner, "_bench", wrap_autotuner_bench)

    def _uninstall(self) -> None:
        while self._originals:
            cls, name, original = self._originals.pop()
            setattr(cls, name, original)

    # recording --------------------------------------------------------------------------
    def _on_launch(self, kernel, args, kwargs, interpreted, result) -> None:
        state = self._state()
        if not state.recorders or state.suppressed:
            return
        config = None
        if state.autotuners and getattr(state.autotuners[-1], "best_config", None) is not None:
            config = dict(state.autotuners[-1].best_config.all_kwargs())
        jit_fn = self.jit_twin(kernel) if interpreted else kernel
        spec = self._specialize(jit_fn, args, kwargs)
        key = (id(jit_fn), spec["key"], repr(sorted((config or {}).items())))
        for recorder in state.recorders:
            recorder.add(key, lambda: _make_launch(jit_fn, spec, config, interpreted, None if interpreted else result))

    def _cuda_backend(self):
        if self._backend is None:
            from triton.backends.compiler import GPUTarget
            from triton.compiler import make_backend

            self._backend = make_backend(GPUTarget("cuda", _SPEC_TARGET_CAPABILITY, 32))
        return self._backend

    def _specialize(self, jit_fn, args, kwargs) -> dict:
        """Triton's own binder: the signature, constexprs and attributes the JIT would compile."""
        from triton.runtime.jit import create_function_from_signature

        backend = self._cuda_backend()
        binder = self._binders.get(jit_fn)
        if binder is None:
            binder = create_function_from_signature(jit_fn.signature, jit_fn.params, backend)
            self._binders[jit_fn] = binder
        kwargs = dict(kwargs)
        kwargs.setdefault("debug", getattr(jit_fn, "debug", None) or False)
        bound_args, specialization, options = binder(*args, **kwargs)
        options, signature, constexprs, attrs = jit_fn._pack_args(backend, kwargs, bound_args, specialization, options)
        launch_options = {
            k: v for k, v in kwargs.items() if k in options.__dict__ and k not in ("debug",) and v is not None
        }
        key = (
            tuple(signature.items()),
            repr(sorted(constexprs.items(), key=repr)),
            repr(sorted(attrs.items(), key=repr)),
            repr(sorted(launch_options.items())),
        )
        return {
            "options": options,
            "signature": signature,
            "constexprs": constexprs,
            "attrs": attrs,
            "launch_options": launch_options,
            "key": key,
        }

    def jit_twin(self, interpreted_fn):
        """A JITFunction equivalent to an InterpretedFunction (TRITON_INTERPRET=1).

        Under the interpreter `@triton.jit` builds InterpretedFunctions, which Triton's compiler
        refuses as callees; the twin sees the same code with every InterpretedFunction in its
        globals replaced by its own twin, so the kernel compiles exactly as on a GPU machine.
        """
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        fn = interpreted_fn.fn
        twin = self._jit_twins.get(fn)
        if twin is not None:
            return twin
        twin_globals = dict(fn.__globals__)
        clone = types.FunctionType(fn.__code__, twin_globals, fn.__name__, fn.__defaults__, fn.__closure__)
        clone.__kwdefaults__ = fn.__kwdefaults__
        for attribute in ("__qualname__", "__module__", "__doc__", "__annotations__"):
            setattr(clone, attribute, getattr(fn, attribute))
        options = {k: v for k, v in interpreted_fn.kwargs.items() if v is not None}
        twin = JITFunction(clone, **options)
        self._jit_twins[fn] = twin  # before recursing: kernels may refer to each other
        for name, value in fn.__globals__.items():
            if isinstance(value, InterpretedFunction):
                twin_globals[name] = self.jit_twin(value)
        return twin


def _make_launch(jit_fn, spec, config, interpreted, compiled) -> KernelLaunch:
    names = list(jit_fn.arg_names)
    options = spec["options"]

    def readable(value):
        if hasattr(value, "value") and value.__class__.__name__ == "constexpr":
            value = value.value
        if isinstance(value, (bool, int, float, str)) or value is None:
            return value
        return str(value)

    constexprs = {
        names[path[0]] if len(path) == 1 else ".".join(map(str, path)): readable(value)
        for path, value in spec["constexprs"].items()
    }
    fn = jit_fn.fn
    return KernelLaunch(
        name=fn.__name__,
        source=f"{fn.__module__}:{fn.__qualname__}",
        signature=dict(spec["signature"]),
        constexprs=constexprs,
        num_warps=options.num_warps,
        num_stages=options.num_stages,
        num_ctas=options.num_ctas,
        options=dict(spec["launch_options"]),
        config=config,
        interpreted=interpreted,
        compiled=compiled,
        jit_function=jit_fn,
        raw_signature=dict(spec["signature"]),
        raw_constexprs=dict(spec["constexprs"]),
        raw_attrs=dict(spec["attrs"]),
    )


_PATCHER = _LaunchPatcher()


@contextmanager
def capture_launches() -> Iterator[list[KernelLaunch]]:
    """Collect the distinct Triton kernel specializations launched in this thread.

    >>> with capture_launches() as launches:
    ...     my_op(x)            # launches kernels (GPU or TRITON_INTERPRET=1)
    >>> launches[0].name, launches[0].constexprs
    """
    recorder = _PATCHER.open()
    try:
        yield recorder.launches
    finally:
        _PATCHER.close(recorder)


def jit_function_for(kernel):
    """The compilable JITFunction behind a kernel object: a JITFunction, an
    InterpretedFunction, or an Autotuner/Heuristics wrapper around either."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    seen = 0
    while not isinstance(kernel, (JITFunction, InterpretedFunction)):
        inner = getattr(kernel, "fn", None)
        if inner is None or seen > 8:
            raise TypeError(f"{kernel!r} is not a Triton kernel (@triton.jit function)")
        kernel, seen = inner, seen + 1
    return _PATCHER.jit_twin(kernel) if isinstance(kernel, InterpretedFunction) else kernel


def specialize(kernel, args, kwargs) -> KernelLaunch:
    """The KernelLaunch Triton would compile for `kernel[grid](*args, **kwargs)`, without launching.

    `args`/`kwargs` may be real values or stand-ins with `dtype` and `data_ptr()`.
    """
    jit_fn = jit_function_for(kernel)
    spec = _PATCHER._specialize(jit_fn, args, kwargs)
    return _make_launch(jit_fn, spec, None, interpreted=False, compiled=None)
