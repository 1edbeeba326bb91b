"""Compare a kernel's output with the reference: dtype-aware tolerances and readable failures.

Rules: the shape and dtype must match; NaN where the reference has a number never passes (outputs
are poisoned with NaN, so NaN usually means "never written"); an all-zero output never passes when
the reference is not all zero; where the reference is infinite or NaN the output must be the same;
otherwise each element must be within a relative tolerance of the reference, measured against the
element (or, for elements near zero, against the output's scale: below ``floor`` times the largest
reference magnitude, 1e-2 unless a day says otherwise).

Why a floor: an output that is itself a near-cancelling sum (a 5x5 filter over random pixels, attention
over thousands of tokens averaging random values towards zero) carries the rounding of its largest
terms, not of its own small magnitude. With float32's 1e-4 and a floor of 1e-2, an element near zero
may be off by 1e-6 of the output's scale: about eight units in the last place of the largest outputs,
the rounding a few dozen fused multiply-adds in a different order leave. (A floor of 1e-3 allowed one
unit, and a 5x5 filter's output missed it about once in a few hundred random images.)
Days whose outputs are such averages set ``ERROR_FLOOR`` in their solution; the graders pass it here.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import numpy as np

# Relative tolerance by result dtype: float32 sums of a few thousand terms land well under 1e-4.
RTOL = {"float16": 2e-2, "bfloat16": 2e-2, "float32": 1e-4, "float64": 1e-9}


# COURSE_MARGIN_LOG=path: every toleranced comparison appends "test<TAB>name<TAB>max error<TAB>tolerance"
# there, so that runs under many COURSE_SEEDs show how close each check comes to its tolerance
# (tools/margins.py summarises): a check whose worst error reaches half its tolerance in a few seeds
# will fail in some run, and its tolerance wants an error model, not a retry.
MARGIN_LOG = "COURSE_MARGIN_LOG"


def _log_margin(name: str, max_rel: float, rtol: float) -> None:
    path = os.environ.get(MARGIN_LOG)
    if not path or not rtol:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "-").rsplit(" (", 1)[0]
    with open(path, "a") as f:
        f.write(f"{test}\t{name}\t{max_rel:.6e}\t{rtol:.6e}\n")


class MismatchError(AssertionError):
    """The output differs from the reference; the message says where and by how much."""


@dataclass
class Report:
    ok: bool
    text: str
    max_rel_error: float

    def __bool__(self) -> bool:
        return self.ok


def to_host(a) -> np.ndarray:
    """A NumPy copy of a NumPy, Numba device or CuPy array."""
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "copy_to_host"):
        return a.copy_to_host()
    if hasattr(a, "get"):
        return a.get()
    return np.asarray(a)


def default_rtol(dtype) -> float:
    dtype = np.dtype(dtype)
    return RTOL.get(dtype.name, 0.0)


FLOOR = 1e-2  # elements below this share of the output's scale are held to an absolute tolerance
# Outputs smaller than this are compared on the host even when they live on a GPU: copying a few MB
# takes microseconds, while CuPy compiles each comparison kernel the first time it meets a dtype (one
# int32 histogram's first re-check took 11 s of a benchmark visit on a fresh machine).
DEVICE_COMPARE_MIN_BYTES = 1 << 22
# A NumPy output at least this large is compared on the GPU too, when there is one: copying 256 MB over
# takes tens of milliseconds, comparing it in float64 on one CPU thread seconds (a benchmark visit's
# re-checks of days 03, 50 and 52, whose versions return NumPy arrays, took 2-4 s a version).
HOST_UPLOAD_MIN_BYTES = 1 << 26


def device_module(got, host_too: bool = False):
    """CuPy when ``got`` lives on a GPU that CuPy can use (or, with ``host_too``, is a NumPy array and
    there is such a GPU), else None: a benchmark's re-check then compares where the output already is,
    instead of copying it over PCIe and comparing in float64 on one CPU thread (measured here: 1.4 s for
    2^26 float32 elements, 9.8 s for 2^27; a day re-checks each version)."""
    if isinstance(got, np.ndarray):
        if not host_too:
            return None
    elif not hasattr(got, "__cuda_array_interface__"):
        return None
    from course import ON_GPU  # the package decided GPU or simulator at import; the simulator's arrays stay on the host

    if not ON_GPU:
        return None
    try:
        import cupy
    except ImportError:
        return None
    return cupy


def compare(got, expected, *, rtol: float | None = None, floor: float | None = None, name: str = "output",
            show: int = 5, min_scale: float = 0.0) -> Report:
    if isinstance(expected, tuple):  # several outputs (a loss and its gradient): each held to its own scale
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return Report(False, f"{name}: expected a tuple of {len(expected)} outputs, got {type(got).__name__}"
                                 + (f" of {len(got)}" if isinstance(got, (tuple, list)) else ""), np.inf)
        parts = [compare(g, e, rtol=rtol, floor=floor, name=f"{name}[{i}]", show=show, min_scale=min_scale)
                 for i, (g, e) in enumerate(zip(got, expected))]
        return Report(all(p.ok for p in parts), "\n".join(p.text for p in parts),
                      max(p.max_rel_error for p in parts))
    nbytes = getattr(got, "nbytes", 0)
    xp = device_module(got, host_too=nbytes >= HOST_UPLOAD_MIN_BYTES) if nbytes >= DEVICE_COMPARE_MIN_BYTES else None
    if xp is not None:
        try:
            return _compare_arrays(xp, xp.asarray(got), expected, rtol, floor, name, show, min_scale)
        except Exception as exc:  # CuPy could not take it: compare on the host, and say so once
            warnings.warn(f"compare: on the device failed ({type(exc).__name__}: {exc}); comparing on the host",
                          RuntimeWarning, stacklevel=2)
    return _compare_arrays(np, to_host(got), expected, rtol, floor, name, show, min_scale)


def _compare_arrays(xp, got, expected, rtol, floor, name, show, min_scale) -> Report:
    expected = np.asarray(expected)
    if got.ndim == 0 and expected.ndim == 0:  # a scalar result (a mean loss): compared as one element
        got, expected = got.reshape(1), expected.reshape(1)
    if got.shape != expected.shape:
        return Report(False, f"{name}: expected shape {expected.shape}, got {tuple(got.shape)}", np.inf)
    if got.dtype != expected.dtype:
        return Report(False, f"{name}: expected dtype {expected.dtype}, got {got.dtype}", np.inf)
    if got.size == 0:
        return Report(True, f"{name}: empty, matches", 0.0)
    return _compare_values(xp, got, expected, rtol, floor, name, show, min_scale)


def _host_item(a, index):
    """One element as a NumPy scalar, from a NumPy or a CuPy array (for the report's lines)."""
    value = a[index]
    return value.get()[()] if hasattr(value, "get") else value


def _compare_values(xp, got, expected, rtol, floor, name, show, min_scale) -> Report:
    """The element-wise rules, in ``xp`` (NumPy, or CuPy on the device ``got`` lives on): the same
    operations either way, so a re-check on the GPU passes and fails exactly where the host's would."""
    rtol = default_rtol(expected.dtype) if rtol is None else rtol
    g = got.astype(np.float64)
    e = xp.asarray(expected).astype(np.float64)

    nan_bad = xp.isnan(g) & ~xp.isnan(e)
    if bool(nan_bad.any()):
        idx = np.asarray(xp.argwhere(nan_bad)[:show].tolist())
        where = ", ".join(str(tuple(int(v) for v in i)) for i in idx)
        return Report(False, f"{name}: {int(nan_bad.sum())} of {got.size} elements are NaN where the reference "
                             f"has a number (outputs start poisoned with NaN: never written?), first at {where}",
                      np.inf)
    if not bool(xp.any(g)) and bool(xp.any(e)):
        return Report(False, f"{name}: every element is zero but the reference is not "
                             "(did the kernel write anything?)", np.inf)

    finite = xp.isfinite(e)
    # The largest finite magnitude (non-finite elements counted as 0, which never raises a maximum).
    scale = float(xp.max(xp.where(finite, xp.abs(e), 0.0))) if bool(finite.any()) else 1.0
    # A day whose outputs have a known scale by construction (MIN_SCALE: day 39's products have unit
    # variance) holds a few outputs that happen to cancel towards zero (a 1 x 1 product of 0.003) to
    # that scale, not to their own sampled maximum.
    scale = max(scale, min_scale)
    floor = max(scale * (FLOOR if floor is None else floor), np.finfo(np.float64).tiny) if rtol else 1.0
    with np.errstate(invalid="ignore"):  # inf - inf is NaN: equal infinities are zeroed next
        diff = xp.abs(g - e)
    same_inf = xp.isinf(e) & (g == e)
    both_nan = xp.isnan(g) & xp.isnan(e)
    diff = xp.where(both_nan | same_inf, 0.0, diff)
    with np.errstate(invalid="ignore"):  # an infinite reference over itself: NaN, replaced next
        rel = diff / xp.maximum(xp.abs(e), floor)
    # A non-finite reference is matched only exactly: the same infinity, or NaN for NaN (a number
    # where the reference is inf would otherwise come out as inf / inf = NaN, which no tolerance fails).
    rel = xp.where(same_inf | both_nan, 0.0, xp.where(xp.isfinite(e), rel, np.inf))
    bad = rel > rtol if rtol else diff != 0
    max_rel = float(xp.nanmax(rel)) if rel.size else 0.0
    _log_margin(name, max_rel, rtol)
    if not bool(bad.any()):
        return Report(True, f"{name}: matches (max relative error {max_rel:.2e}, tolerance {rtol:.0e})", max_rel)
    idx = np.asarray(xp.argwhere(bad)[:show].tolist())
    lines = [f"{name}: {int(bad.sum())} of {got.size} elements differ "
             f"(max relative error {max_rel:.3e}, tolerance {rtol:.0e})"]
    for i in idx:
        t = tuple(int(v) for v in i)
        key = t[0] if len(t) == 1 else t
        lines.append(f"  at {key}: expected {expected[t]!r}, got {_host_item(got, t)!r}")
    return Report(False, "\n".join(lines), max_rel)


def assert_matches(got, expected, *, rtol: float | None = None, floor: float | None = None,
                   name: str = "output") -> None:
    """Raise :class:`MismatchError` with a readable report unless ``got`` matches ``expected``."""
    report = compare(got, expected, rtol=rtol, floor=floor, name=name)
    if not report.ok:
        raise MismatchError(report.text)
