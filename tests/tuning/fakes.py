"""A fake GPU for the tuner: known times per config, a clock that advances only while timing.

``FakeGpu.timer(config)`` is a ``timer_factory``: its timers follow ``sampling.Timer`` and
charge every call to the fake clock, so "GPU seconds" are exact and tests never sleep.
"""

import dataclasses
import math
import random

from pytest_tesserabench.measure import sampling
from pytest_tesserabench.tuning import ConfigSpace, Problem, Tunable, Work

# A short plan: one warm-up call, rounds of one sample, at least 3 rounds.
FAST_BUDGET = sampling.Budget(max_time=0.01, min_rounds=3, warmup=0.0, target_ci=0.01)


class FakeTimer:
    name = "fake"
    inner = 1

    def __init__(self, gpu, ms):
        self.gpu, self.ms = gpu, ms

    def time_once(self):
        self.gpu.now += self.ms / 1e3
        return self.ms / 1e3

    def calibrate(self, seconds_per_call):
        pass

    def round(self, samples):
        out = [self.ms * (1 + self.gpu.noise * self.gpu.rng.gauss(0, 1)) for _ in range(samples)]
        self.gpu.now += sum(out) / 1e3
        return out


class FakeGpu:
    def __init__(self, times, *, noise=0.002, seed=0, broken=()):
        self.times = times  # config -> ms
        self.noise = noise
        self.rng = random.Random(seed)
        self.broken = set(broken)  # configs whose launch raises, as a config that fails to run
        self.now = 0.0
        self.launched = []  # configs given a timer, in order

    def clock(self):
        return self.now

    def timer(self, config):
        self.launched.append(config)
        if config in self.broken:
            raise RuntimeError("triton.runtime.errors.OutOfResources: out of resource: shared memory")
        return FakeTimer(self, self.times(config))


def landscape_ms(config):
    """A bowl with one optimum: A=64, B=128, num_warps=4, num_stages=3 at 1.0 ms."""
    return (
        1.0
        + 0.3 * abs(math.log2(config["A"] / 64))
        + 0.2 * abs(math.log2(config["B"] / 128))
        + 0.1 * abs(math.log2(config["num_warps"] / 4))
        + 0.05 * abs(config["num_stages"] - 3)
    )


def _landscape_kernel():
    """Stands in for a kernel's source: only its hash is used."""


LANDSCAPE = Tunable(
    name="landscape",
    shape_names=("n",),
    dtypes=("fp16",),
    kernel=lambda: _landscape_kernel,
    space=lambda problem: ConfigSpace(
        params={
            "A": [16, 32, 64, 128, 256],
            "B": [16, 32, 64, 128, 256],
            "num_warps": [2, 4, 8],
            "num_stages": [1, 2, 3, 4],
        },
        constraints=["A * B <= 16384"],
    ),
    specialize=lambda config, problem: None,
    work=lambda config, problem: Work(1, 1.0, 1.0, "fp16"),
    default_problems=(Problem({"n": 1024}, ("fp16",)),),
)


# The landscape as a kernel with a launcher: what `tesserabench tune` times on a (fake) GPU.
LANDSCAPE_GPU = dataclasses.replace(LANDSCAPE, runner=lambda problem, device: lambda config: lambda: None)
