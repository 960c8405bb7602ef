"""The regression gate: history mode (a run against a baseline's runs) and A/B mode (two trees in
one job), and the kernel figures both compare.

* ``config``: every number that can change a verdict (GateConfig);
* ``centres``: a run's centre of one benchmark; ``model``: the run-effect model and this run's
  shared shift; ``rule``: the decision rule; ``conditions``: what the run's conditions soften;
  ``pipeline``: history mode as one pipeline of those stages, for the plugin and the CLI alike;
* ``kernels``: the deterministic kernel figures; ``paired``: A/B's paired rule.

docs/gate.md is the reference.
"""

from pytest_tesserabench.gate.config import GateConfig

__all__ = ["GateConfig"]
