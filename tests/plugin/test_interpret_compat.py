"""The interpreter shim: a program id serves as a Python index on every supported Triton."""

import types

import numpy as np
import pytest

from pytest_tesserabench.machine import interpret


class _Scope:
    def __init__(self):
        self.values = {}

    def set_attr(self, obj, name, value):
        self.values[name] = value


def _index_of(patch_lang_tensor, data):
    scope = _Scope()
    patch_lang_tensor(object, scope)
    tensor = types.SimpleNamespace(handle=types.SimpleNamespace(data=data))
    return scope.values["__index__"](tensor)


def _int_of_array(data):  # as NumPy >= 2.4 converts, whatever NumPy this is
    if data.ndim:
        raise TypeError("only 0-dimensional arrays can be converted to Python scalars")
    return int(data)


def _triton_36_style(tensor, scope):
    scope.set_attr(tensor, "__index__", lambda self: _int_of_array(self.handle.data))


def _triton_37_style(tensor, scope):
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))


def test_an_interpreter_whose_index_refuses_a_program_id_is_patched():
    module = types.SimpleNamespace(_patch_lang_tensor=_triton_36_style)
    interpret.patch_interpreter(module)
    assert module._patch_lang_tensor is not _triton_36_style
    assert _index_of(module._patch_lang_tensor, np.array([7], dtype=np.int32)) == 7
    patched = module._patch_lang_tensor
    interpret.patch_interpreter(module)  # once only
    assert module._patch_lang_tensor is patched


def test_an_interpreter_that_squeezes_is_left_alone():
    module = types.SimpleNamespace(_patch_lang_tensor=_triton_37_style)
    interpret.patch_interpreter(module)
    assert module._patch_lang_tensor is _triton_37_style


def test_the_installed_triton_interpreter_takes_a_program_id_as_index():
    module = pytest.importorskip("triton.runtime.interpreter")
    interpret.patch_interpreter(module)
    assert _index_of(module._patch_lang_tensor, np.array([5], dtype=np.int32)) == 5


def test_an_inner_session_leaves_the_outer_sessions_autotuner_patch(pytester):
    if not interpret.interpreting():
        pytest.skip("the outer session runs kernels on a GPU: nothing is patched")
    import triton.runtime.autotuner as autotuner

    def patched():
        return hasattr(autotuner.Autotuner.__dict__["_bench"], "__tesserabench_original__")

    assert patched()
    pytester.makepyfile("def test_nothing(): pass")
    pytester.runpytest_inprocess("-p", "no:randomly").assert_outcomes(passed=1)
    assert patched()  # the inner session's end must not undo the outer session's deterministic autotuning
