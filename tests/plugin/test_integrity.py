"""Results that cannot cheat (measure/integrity.py): kernels written to cheat each way fail their
test naming the cause; honest kernels that look alike pass; allow= turns a check off."""

from types import SimpleNamespace

import pytest

from pytest_tesserabench.measure import integrity

torch = pytest.importorskip("torch")

CHEATS = """
import functools
import numpy as np
import torch

def accumulate(x):               # each call adds to its input: every timed call sees other data
    return x.add_(1)

def accumulate_numpy(x):
    return np.add(x, 1, out=x)

def copy_into(dst, src):         # writes its output argument the same way each call: honest
    return dst.copy_(src)

def transpose(x):                # a view of the input: nothing computed
    return x.t()

def identity(x):
    return x

@functools.lru_cache(maxsize=None)
def _by_shape(shape):
    return torch.randn(shape)

def cached(x):                   # the result depends on the shape only: a lookup after the first call
    return _by_shape(tuple(x.shape))

class StaticOutput:              # one output buffer, written anew each call (CUDA-graph style): honest
    def __init__(self):
        self.out = None
    def __call__(self, x):
        if self.out is None:
            self.out = torch.empty_like(x)
        return torch.mul(x, 2, out=self.out)

static_output = StaticOutput()
"""


@pytest.fixture
def cheats(pytester):
    pytester.makepyfile(cheats=CHEATS)
    return pytester


def _run(pytester, fast, body):
    pytester.makepyfile(test_k="import numpy as np\nimport torch\nfrom cheats import *\n\n" + body)
    return pytester.runpytest("--bench", *fast)


def test_a_kernel_that_changes_its_input_fails_naming_it(cheats, fast):
    result = _run(cheats, fast, "def test_k(bench):\n    bench(accumulate, torch.zeros(64))\n")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*bench(accumulate): the calls change argument 1 in place*each timed call worked on different data*"
         "allow=('inplace',)*"]
    )  # fmt: skip
    numpy_run = _run(cheats, fast, "def test_k(bench):\n    bench(accumulate_numpy, x=np.zeros(64))\n")
    numpy_run.assert_outcomes(failed=1)
    numpy_run.stdout.fnmatch_lines(["*bench(accumulate_numpy): the calls change x= in place*"])


def test_in_place_by_design_is_allowed_by_name(cheats, fast):
    body = "def test_k(bench):\n    bench(accumulate, torch.zeros(64), allow=('inplace',))\n"
    _run(cheats, fast, body).assert_outcomes(passed=1)


def test_writing_an_output_argument_the_same_way_each_call_passes(cheats, fast):
    body = (
        "def test_k(bench):\n"
        "    src = torch.randn(256)\n"
        "    bench(copy_into, torch.empty_like(src), src)\n"
        "    bench(static_output, src, name='static')\n"
        # an output buffer that already holds what the call writes (reused memory): still honest
        "    bench(copy_into, src.clone(), src, name='again')\n"
        # a linear kernel into an out= buffer that holds its last result
        "    bench(torch.mul, src, 2, out=torch.empty_like(src), name='mul')\n"
        "    bench(np.multiply, src.numpy(), 2, out=np.empty(256, dtype=np.float32), name='np')\n"
    )
    _run(cheats, fast, body).assert_outcomes(passed=1)


def test_a_view_of_the_input_fails_as_nothing_computed(cheats, fast):
    result = _run(cheats, fast, "def test_k(bench):\n    bench(transpose, torch.randn(8, 8), name='t')\n")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*bench(transpose, name='t'): its result is argument 1 or a view of it, which the call left unchanged*"]
    )
    body = "def test_k(bench):\n    bench(identity, torch.randn(8), allow='alias')\n"
    _run(cheats, fast, body).assert_outcomes(passed=1)


def test_a_cached_result_fails(cheats, fast):
    result = _run(cheats, fast, "def test_k(bench):\n    bench(cached, torch.randn(16))\n")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*bench(cached): a call on different inputs returned the very same object*"])
    body = "def test_k(bench):\n    bench(cached, torch.randn(16), allow=['cached'])\n"
    _run(cheats, fast, body).assert_outcomes(passed=1)


LAZY = """
import asyncio, concurrent.futures, functools, os, pytest

ALLOW = os.environ["ALLOW"].split(",") if os.environ.get("ALLOW") else None

def squares(n):
    for i in range(n):
        yield i * i

async def total(n):
    return sum(range(n))

async def ticks(n):
    for i in range(n):
        yield i

POOL = concurrent.futures.ThreadPoolExecutor(1)

@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

CASES = {
    "generator": (squares, (1000,), "a generator"),
    "map": (lambda n: map(abs, range(n)), (1000,), "an iterator (map)"),
    "coroutine": (total, (1000,), "a coroutine"),
    "future": (lambda n: POOL.submit(sum, range(n)), (1000,), "a Future"),
    "async generator": (ticks, (1000,), "an async generator"),
}

@pytest.mark.parametrize("case", CASES)
def test_lazy(bench, case):
    fn, args, _ = CASES[case]
    bench(fn, *args, allow=ALLOW)

def test_memoised(bench):
    bench(fib, 30, allow=ALLOW)

def test_honest(bench):
    bench(lambda n: list(squares(n)), 1000)
    bench(lambda n: asyncio.run(total(n)), 1000, name="run")
    bench(fib.__wrapped__, 10, name="wrapped")
    bench(lambda: range(10), name="a range")  # a container, not work left undone
    bench(functools.lru_cache(maxsize=0)(fib.__wrapped__), 10, name="no cache")  # keeps nothing
"""


def test_work_not_yet_done_and_a_memoised_function_fail_naming_the_fix(pytester, fast, monkeypatch):
    pytester.makepyfile(test_lazy=LAZY)
    result = pytester.runpytest_subprocess("--bench", *fast, "-W", "error::RuntimeWarning")
    result.assert_outcomes(failed=6, passed=1)
    cases = [("generator", "a generator"), ("map", "an iterator (map)"), ("coroutine", "a coroutine")]
    for case, kind in [*cases, ("async generator", "an async generator")]:
        said = f"*the first call returned {kind}, work not yet done*"
        result.stdout.fnmatch_lines([f"*_ test_lazy[[]{case}[]] _*", said])
    result.stdout.fnmatch_lines(
        [
            "*_ test_lazy[[]future[]] _*",
            "*returned a Future, work not yet done*or pass allow=('lazy',)",
            "*_ test_memoised _*",
            "bench(fib): fib is memoised (functools.lru_cache or cache)*fn.__wrapped__*allow=('cached',)",
        ]
    )
    assert "never awaited" not in result.stdout.str() + result.stderr.str()
    monkeypatch.setenv("ALLOW", "lazy,cached")
    pytester.runpytest_subprocess("--bench", *fast).assert_outcomes(passed=7)
    pytester.runpytest_subprocess().assert_outcomes(passed=7)  # (plain pytest: one plain call, no checks)


def test_an_unknown_check_is_a_usage_error_with_or_without_bench(pytester, fast):
    pytester.makepyfile("def test_k(bench):\n    bench(sum, [1, 2], allow=('inplce',))\n")
    for args in ((), ("--bench", *fast)):
        result = pytester.runpytest(*args)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*bench(allow=('inplce',)): unknown check(s) *inplce*; choose from inplace*"])


TRITON_CHEAT = """
import torch, triton, triton.language as tl

@triton.jit
def _increment_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)

def increment(x):
    _increment_kernel[(triton.cdiv(x.numel(), 64),)](x, x.numel(), BLOCK=64)
    return x

def test_k(bench):
    bench(increment, torch.zeros(100))
"""


def test_a_triton_kernel_that_updates_its_input_fails(pytester, fast):
    pytest.importorskip("triton")
    pytester.makepyfile(test_k=TRITON_CHEAT)
    result = pytester.runpytest("--bench", *fast)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*bench(increment): the calls change argument 1 in place*"])


class _LingeringGpu:
    """Events on the current stream read ``timed_ms``; the device stays busy ``lingers_ms`` more."""

    def __init__(self, timed_ms: float, lingers_ms: float):
        self.now = 0.0
        self.timed_ms, self.lingers_ms = timed_ms, lingers_ms
        gpu = self

        class Event:
            def __init__(self, enable_timing=False):
                pass

            def record(self):
                pass

            def synchronize(self):
                pass

            def elapsed_time(self, end):
                return gpu.timed_ms

        def synchronize(device=None):
            gpu.now += gpu.lingers_ms / 1e3

        self.torch = SimpleNamespace(cuda=SimpleNamespace(Event=Event, synchronize=synchronize))

    def clock(self):
        return self.now


def test_work_that_outlives_the_timed_window_is_named():
    gpu = _LingeringGpu(timed_ms=0.005, lingers_ms=3.0)
    problem = integrity.check_async(lambda: None, gpu.torch, "cuda", clock=gpu.clock)
    assert problem.startswith("work outlives the timed window: the GPU stayed busy 3 ms")
    assert "(0.005 ms for the call)" in problem and "allow=('async',)" in problem
    honest = _LingeringGpu(timed_ms=0.5, lingers_ms=0.01)
    assert integrity.check_async(lambda: None, honest.torch, "cuda", clock=honest.clock) is None


def test_a_torch_builtin_is_named_as_a_user_calls_it():
    from pytest_tesserabench.measure.fixture import _label

    assert _label(torch.mul, None) == "bench(torch.mul)"
    assert _label(sorted, "s") == "bench(sorted, name='s')"


def test_fp8_inputs_are_perturbed_too():
    x = torch.randn(8).to(torch.float8_e4m3fn)
    (moved,), _ = integrity.perturbed((x,), {})
    assert moved.dtype == torch.float8_e4m3fn and not torch.equal(moved.float(), x.float())


def test_perturbed_inputs_differ_everywhere_and_leave_the_originals_alone():
    x, mask, idx = torch.randn(4), torch.tensor([True, False]), torch.arange(3)
    moved_args, moved_kwargs = integrity.perturbed((x, [mask, 3], x), {"idx": idx})
    assert not torch.equal(moved_args[0], x) and torch.equal(moved_args[1][0], ~mask)
    assert not torch.equal(moved_args[0], moved_args[2])  # two arrays that were equal no longer are
    assert moved_args[1][1] == 3 and torch.equal(moved_kwargs["idx"], idx + 4)
    # no affine map of one perturbed array gives another (a linear kernel's out= buffer)
    y = 2 * x
    (px, py), _ = integrity.perturbed((x, y), {})
    assert not torch.allclose(2 * px, py)
    assert torch.equal(idx, torch.arange(3))
    assert integrity.perturbed((1, "a"), {}) is None
