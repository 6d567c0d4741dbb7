"""Numbers over seeds and the small helpers every observer module shares: the
aggregate of summaries across seeds (``aggregate.json``), quantiles, a mean that
skips missing values."""
from __future__ import annotations

import math
import statistics
from typing import Any, Iterable, Optional

from ..core.dotted import leaves

__all__ = ["aggregate", "quantile", "mean_of", "frac"]


def mean_of(xs: list) -> Any:
    """The mean of the values that are not None; None when there are none."""
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def frac(k: int, n: int) -> Any:
    """k / n; None when n is 0."""
    return k / n if n else None


def quantile(xs: Iterable[float], q: float) -> Optional[float]:
    """The ``q`` quantile of ``xs`` by linear interpolation between order
    statistics (numpy's default, ``statistics.quantiles(method="inclusive")``);
    None for no values."""
    v = sorted(xs)
    if not v:
        return None
    pos = (len(v) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def aggregate(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean, sample std, min, max and n for every numeric leaf across seeds.

    Booleans are aggregated as the count of ``true``; ``None`` (e.g. an
    undetected agent's delay) is left out of the mean and counted in
    ``missing``.
    """
    values: dict[str, list] = {}
    for s in summaries:
        for path, v in leaves(s):
            values.setdefault(path, []).append(v)
    out: dict[str, Any] = {}
    for path in sorted(values):
        vals = values[path]
        if all(isinstance(v, bool) for v in vals):
            out[path] = {"true": sum(vals), "n": len(vals)}
            continue
        nums = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)
                and math.isfinite(v)]
        if not nums or len(nums) + sum(v is None for v in vals) != len(vals):
            continue
        entry = {"mean": statistics.fmean(nums), "std": statistics.stdev(nums) if len(nums) > 1 else 0.0,
                 "min": min(nums), "max": max(nums), "n": len(nums)}
        missing = sum(v is None for v in vals)
        if missing:
            entry["missing"] = missing
        out[path] = entry
    return out
