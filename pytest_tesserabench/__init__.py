"""pytest-tesserabench: GPU-kernel benchmarks as ordinary pytest tests.

Importing this package imports neither torch nor triton.
"""

from pytest_tesserabench.measure.precision import Precision, PrecisionError

__all__ = ["Precision", "PrecisionError", "__version__"]
__version__ = "0.1.0"
