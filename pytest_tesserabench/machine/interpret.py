"""Triton kernels on a machine without a GPU: the interpreter, switched on before tests import them.

``@triton.jit`` reads ``TRITON_INTERPRET`` when a kernel is decorated, so the switch must be set
before test modules (or the conftest files that import kernels) are imported: the plugin does it
in ``pytest_load_initial_conftests``, the first hook a plugin gets. ``--bench-interpret``:

* ``auto`` (default): interpret when no GPU driver is present (``machine.gpu_plausibly_present``,
  which imports nothing); a ``TRITON_INTERPRET`` the user set wins;
* ``always`` / ``never``: set it to 1 / 0 whatever the environment says.

Autotuned kernels: timing configs in the interpreter measures the CPU, not a GPU, costs every
config's interpreted run many times over, and picks a different config from run to run (so the
static figures of "the kernel that ran" change with the machine's load). While interpreting, the
autotuner therefore takes the first config left after the kernel's own ``prune_configs_by``,
without timing anything. The patch is installed when Triton's autotuner module is imported (an
import hook, so a session that never imports Triton pays nothing) and acts only while the
interpreter is on; on a GPU, autotuning is untouched.

The interpreter itself (Triton < 3.7 with NumPy >= 2.4): a program id cannot serve as a Python
index, so ``range(tl.program_id(0), ...)`` fails; the same import hook gives the interpreter the
``__index__`` Triton 3.7+ has (``patch_interpreter``), and leaves a Triton that has it alone.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import warnings
from dataclasses import dataclass

ENV = "TRITON_INTERPRET"
# Triton 3.9 warns on every compile until this is set; "1" is its current default (fused
# multiply-add on), so setting it when unset changes nothing but the warning (and keeps Triton's
# cache keys the same in every process: they include it).
FP_FUSION_ENV = "TRITON_DEFAULT_FP_FUSION"
_AUTOTUNER = "triton.runtime.autotuner"
_INTERPRETER = "triton.runtime.interpreter"


def wanted(mode: str, environ: dict | None = None) -> bool | None:
    """Whether to interpret (True/False), or None to leave the environment as it is."""
    # the device (~50 modules, ~19 ms): every `tesserabench` command reads FP_FUSION_ENV from here
    from pytest_tesserabench.machine import device as machine

    environ = os.environ if environ is None else environ
    if mode == "always":
        return True
    if mode == "never":
        return False
    if environ.get(ENV) is not None:  # the user's own setting wins over auto
        return None
    return not machine.gpu_plausibly_present()


def interpreting(environ: dict | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return environ.get(ENV, "0").strip().lower() in ("1", "true", "on", "yes")


@dataclass
class Switch:
    """What ``switch_on`` changed, so ``restore`` can undo it at the end of the session."""

    previous: str | None
    changed: bool
    finder: _PatchOnImport | None = None
    set_fp_fusion: bool = False


def apply(mode: str) -> Switch:
    """Set ``TRITON_INTERPRET`` for ``mode`` and arm the autotuner patch."""
    decision = wanted(mode)
    switch = Switch(previous=os.environ.get(ENV), changed=decision is not None)
    if decision is not None:
        os.environ[ENV] = "1" if decision else "0"
    if FP_FUSION_ENV not in os.environ:
        os.environ[FP_FUSION_ENV] = "1"
        switch.set_fp_fusion = True
    switch.finder = _PatchOnImport.install()
    return switch


def restore(switch: Switch) -> None:
    if switch.changed:
        if switch.previous is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = switch.previous
    if switch.finder is not None:
        switch.finder.uninstall()
    if switch.set_fp_fusion:
        os.environ.pop(FP_FUSION_ENV, None)


# -- the autotuner -----------------------------------------------------------------------------
def _deterministic_bench(original):
    def _bench(tuner, *args, config, **meta):
        if not interpreting():
            return original(tuner, *args, config=config, **meta)
        # A "timing" that orders configs as the kernel lists them: min() picks the first.
        position = float(tuner.configs.index(config)) if config in tuner.configs else float(len(tuner.configs))
        return [position, position, position]

    _bench.__tesserabench_original__ = original
    return _bench


def patch_autotuner(module) -> None:
    autotuner = module.Autotuner
    current = autotuner.__dict__["_bench"]
    if not hasattr(current, "__tesserabench_original__"):
        autotuner._bench = _deterministic_bench(current)


# -- the interpreter's scalar tensors ---------------------------------------------------------
def _squeezed_index(tensor) -> int:
    return int(tensor.handle.data.squeeze())


def _index_works(patch_lang_tensor) -> bool:
    """Whether the interpreter's ``tensor.__index__`` takes a program id (a shape-(1,) array)."""
    import numpy as np  # ~120 ms: only once Triton's interpreter loads; every `tesserabench` command reads this module

    class Scope:
        def __init__(self):
            self.values = {}

        def set_attr(self, obj, name, value):
            self.values[name] = value

    class Handle:
        data = np.array([3], dtype=np.int32)

    class Tensor:
        handle = Handle()

    scope = Scope()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)  # NumPy < 2.4 only deprecates it
            patch_lang_tensor(type("tensor", (), {}), scope)
            return scope.values["__index__"](Tensor()) == 3
    except (TypeError, DeprecationWarning):
        return False
    except Exception:  # noqa: BLE001 - a layout we do not know: leave the interpreter alone
        return True


def patch_interpreter(module) -> None:
    """Triton < 3.7's interpreter has ``tensor.__index__ = int(self.handle.data)``; a program id is
    a shape-(1,) array, which NumPy >= 2.4 refuses to convert ("only 0-dimensional arrays can be
    converted to Python scalars"), so ``range(tl.program_id(0), n, tl.num_programs(0))`` fails.
    Triton 3.7+ squeezes the array first; do the same where the interpreter does not."""
    current = getattr(module, "_patch_lang_tensor", None)
    if current is None or hasattr(current, "__tesserabench_original__") or _index_works(current):
        return

    def _patch_lang_tensor(tensor, scope):
        current(tensor, scope)
        scope.set_attr(tensor, "__index__", _squeezed_index)  # restored with the interpreter's own

    # Kept for the life of the process (never undone in `restore`): a session run inside this one
    # (pytester) restores its own switch while this one still interprets.
    _patch_lang_tensor.__tesserabench_original__ = current
    module._patch_lang_tensor = _patch_lang_tensor


_PATCHES = {_AUTOTUNER: patch_autotuner, _INTERPRETER: patch_interpreter}


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches Triton's autotuner and interpreter as soon as they are imported (or now, if they are)."""

    @classmethod
    def install(cls) -> _PatchOnImport:
        finder = cls()
        for name, patch in _PATCHES.items():
            if name in sys.modules:
                patch(sys.modules[name])
        if not all(name in sys.modules for name in _PATCHES):
            sys.meta_path.insert(0, finder)
        return finder

    def uninstall(self) -> None:
        # The patches stay for the process: they act only while the interpreter is on, and undoing
        # them at one session's end would undo them for an outer session too (pytester in-process).
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname, path, target=None):
        patch = _PATCHES.get(fullname)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        original_exec = spec.loader.exec_module

        def exec_module(module):
            original_exec(module)
            patch(module)

        spec.loader.exec_module = exec_module  # this spec's own loader instance
        return spec
