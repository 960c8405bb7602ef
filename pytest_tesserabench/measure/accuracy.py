"""Accuracy of a kernel's output against a reference, under a precision policy's tolerances.

Element-wise rule (as torch.testing): |actual - expected| <= atol + rtol * |expected|, with equal
infinities equal and NaN never passing unless both sides are NaN at the same place, and atol at
least the accumulator's own atol times the reference's root-mean-square magnitude: an element of
a long reduction that lands near zero still carries the accumulator's rounding error in
proportion to the terms it summed, not to itself: fp32 ``a @ b`` against fp64 errs by a few
millionths of the reference's rms at any K, which a fixed atol=1e-5 outgrows from K = 256 (it
would fail torch itself). Only the accumulator's
share scales: a bf16 output's own rounding is relative to itself (rtol), so its atol stays 3e-2.
The recorded ``max_rel`` is |actual - expected| / max(|expected|, atol), so near-zero references
do not turn rounding noise into an infinite relative error.
"""

from __future__ import annotations

import sys

import numpy as np

from pytest_tesserabench.measure.precision import Precision


class AccuracyError(AssertionError):
    """The output is further from the reference than the policy allows."""


def _to_numpy(value) -> np.ndarray:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().to(device="cpu", dtype=torch.float64).numpy()
    return np.asarray(value, dtype=np.float64)


def compare(actual, expected, precision: Precision | str) -> dict:
    """Measure the error; the dict has max_abs, max_rel, mismatched, total, rtol, atol, ok, worst."""
    policy = Precision.parse(precision)
    a, e = _to_numpy(actual), _to_numpy(expected)
    if a.shape != e.shape:
        raise AccuracyError(
            f"accuracy check: output shape {tuple(a.shape)} differs from the reference's {tuple(e.shape)}"
        )
    rtol = policy.rtol
    atol = max(policy.atol, Precision.parse(policy.accum).atol * _rms(e))
    with np.errstate(invalid="ignore"):
        same = (a == e) | (np.isnan(a) & np.isnan(e))
        diff = np.where(same, 0.0, np.abs(a - e))
        diff = np.where(np.isnan(diff), np.inf, diff)  # NaN on one side only: infinitely wrong
        bad = diff > atol + rtol * np.abs(np.where(np.isfinite(e), e, 0.0))
        rel = diff / np.maximum(np.abs(np.where(np.isfinite(e), e, 0.0)), atol)
    result = {
        "max_abs": float(diff.max()) if diff.size else 0.0,
        "max_rel": float(rel.max()) if rel.size else 0.0,
        "mismatched": int(np.count_nonzero(bad)),
        "total": int(a.size),
        "rtol": rtol,
        "atol": atol,
        "atol_policy": policy.atol,
        "precision": str(policy),
        "ok": not bool(np.any(bad)),
    }
    if not result["ok"]:
        worst = np.unravel_index(int(np.argmax(np.where(bad, diff, -1.0))), a.shape) if a.ndim else ()
        result["worst"] = {
            "index": [int(i) for i in worst],
            "actual": float(a[worst]),
            "expected": float(e[worst]),
        }
    return result


def _rms(expected: np.ndarray) -> float:
    """The reference's root-mean-square magnitude over its finite elements (0 without any)."""
    finite = expected[np.isfinite(expected)]
    return float(np.sqrt(np.mean(np.square(finite)))) if finite.size else 0.0


def failure_message(result: dict) -> str:
    worst = result.get("worst", {})
    atol = f"{result['atol']:g}"
    if result.get("atol_policy") not in (None, result["atol"]):
        atol += f" (the accumulator's atol x the reference's rms magnitude; the policy's {result['atol_policy']:g})"
    return (
        f"accuracy check failed for precision {result['precision']}: {result['mismatched']} of "
        f"{result['total']} elements differ by more than atol={atol} + "
        f"rtol={result['rtol']:g}*|expected|; max abs error {result['max_abs']:.4g}, "
        f"max rel error {result['max_rel']:.4g}; worst at index {tuple(worst.get('index', ()))}: "
        f"actual {worst.get('actual')!r}, expected {worst.get('expected')!r}"
    )
