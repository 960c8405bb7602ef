"""Compile against `triton.language` as a GPU process sees it, whatever the interpreter left.

Under TRITON_INTERPRET=1 a kernel launch patches `triton.language` for the interpreter (builtins
wrapped to call the interpreter's semantic, `range` -> Python's range, `multiple_of` -> a
NumPy attribute setter, ...) and restores it when the launch ends. But a call from one @jit
function to another (`InterpretedFunction.__call__`: `tl.sum`, `tl.max`, a project helper)
patches the language modules in the *callee's* globals and never restores them (Triton 3.6
to 3.9). `tl.sum`'s module refers to `triton.language.core` as `core`, which the kernel's own
restore does not cover when the kernel names only `triton.language`: after the first
interpreted kernel that reduces, `triton.language.core.cast`, `.to_tensor`, `.load`, ... stay
interpreter wrappers for the life of the process. The compiler reaches them through core's
own code (`tensor.to` calls core's `cast`), feeds them IR values, and the compile fails with
"'block_argument' object has no attribute 'dtype'".

`language_as_compiled()` puts the real members back for the duration of a compile and the
interpreter's leftovers back afterwards, so neither side sees the other's state:

* a builtin wrapped by the interpreter's `_patch_attr` keeps the member it wraps as the
  keyword default `member`;
* anything else the interpreter put on a module (`range`, `static_assert`, `reduce`, ...)
  is restored from the same name in another `triton.language` module that is not patched
  (`triton.language.range` is `triton.language.core.range`).

Attributes of classes (`tensor.__bool__`, `dtype.to_ir`, ...) are always restored by the
outer launch, since every kernel's language module shares those classes; should one be found
patched without a recoverable original, the compile fails with a message naming it rather
than building IR with interpreter code.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import sys
import types

_INTERPRETER_MODULE = "triton.runtime.interpreter"
_MISSING = object()
# Names the interpreter replaces with a Python builtin rather than one of its own functions.
_BUILTIN_REPLACEMENTS = {"static_print": builtins.print}


class InterpreterStateError(RuntimeError):
    """The interpreter left `triton.language` patched in a way that cannot be undone."""


def _from_interpreter(name: str, value) -> bool:
    """Whether `value`, found as `name` in the language, is a patch the interpreter made.

    Patches are functions made inside the interpreter's patching code (lambdas, closures,
    partials of them, a property) or a Python builtin. Functions the interpreter defines at
    module level are not patches: running a kernel copies the interpreter's module globals
    into the kernel's (and `triton.language.standard`'s) namespace under names that did not
    exist there, which no real code refers to."""
    if _BUILTIN_REPLACEMENTS.get(name, _MISSING) is value:
        return True
    if isinstance(value, functools.partial):
        value = value.func
    elif isinstance(value, property):
        value = value.fget
    if not isinstance(value, types.FunctionType) or value.__module__ != _INTERPRETER_MODULE:
        return False
    interpreter = sys.modules.get(_INTERPRETER_MODULE)
    return vars(interpreter).get(value.__name__) is not value if interpreter is not None else True


def _language_modules() -> list:
    return [
        module
        for name, module in list(sys.modules.items())
        if module is not None and (name == "triton.language" or name.startswith("triton.language."))
    ]


def _language_classes(modules) -> list:
    seen, classes = set(), []
    for module in modules:
        for value in list(vars(module).values()):
            if (
                isinstance(value, type)
                and id(value) not in seen
                and getattr(value, "__module__", "").startswith("triton.language")
            ):
                seen.add(id(value))
                classes.append(value)
    return classes


def _wrapped_member(value):
    """The member an interpreter wrapper calls, when it says (`_patch_attr`'s `member=`)."""
    defaults = getattr(value, "__kwdefaults__", None) or {}
    member = defaults.get("member", _MISSING)
    while member is not _MISSING and _from_interpreter("", member):
        member = (getattr(member, "__kwdefaults__", None) or {}).get("member", _MISSING)
    return member


def leftover_patches() -> list[tuple[object, str, object, object]]:
    """(owner, name, interpreter value, real value or _MISSING) for each member of a
    `triton.language` module or class that is currently an interpreter patch."""
    modules = _language_modules()
    found = []
    for owner in (*modules, *_language_classes(modules)):
        for name, value in list(vars(owner).items()):
            if not _from_interpreter(name, value):
                continue
            original = _wrapped_member(value)
            if original is _MISSING and not isinstance(owner, type):
                for other in modules:
                    candidate = vars(other).get(name, _MISSING)
                    if candidate is not _MISSING and not _from_interpreter(name, candidate):
                        original = candidate
                        break
            found.append((owner, name, value, original))
    return found


@contextlib.contextmanager
def language_as_compiled():
    """Within the block `triton.language` holds its real members, not the interpreter's."""
    if _INTERPRETER_MODULE not in sys.modules:  # nothing was ever interpreted
        yield
        return
    replaced, unrecoverable = [], []
    try:
        for owner, name, value, original in leftover_patches():
            if original is _MISSING:
                unrecoverable.append(f"{getattr(owner, '__name__', owner)}.{name}")
                continue
            setattr(owner, name, original)
            replaced.append((owner, name, value))
        if unrecoverable:
            raise InterpreterStateError(
                "Triton's interpreter left triton.language patched and the real members could not be "
                f"found: {', '.join(unrecoverable)}; analyse in a process that has not run kernels "
                "under TRITON_INTERPRET=1"
            )
        yield
    finally:
        for owner, name, value in reversed(replaced):
            setattr(owner, name, value)
