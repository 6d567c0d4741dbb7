"""Statistics per sweep point over seeds: standard error, 95 % interval, and
paired differences on shared seeds (common random numbers: every point runs
the same seeds, so a difference between two points is measured seed by seed,
which removes the noise the seeds share).

Intervals are Student-t intervals on the seed mean (``mean ± t_{0.975, n-1} ·
sd / √n``); with one seed there is none (NaN). Two points are
*distinguishable* on a metric when the paired-difference interval excludes 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping, Sequence

__all__ = ["Interval", "interval", "paired", "distinguishable"]


@dataclass(frozen=True)
class Interval:
    mean: float
    se: float  # standard error of the mean (NaN with fewer than two values)
    lo: float
    hi: float
    n: int


@lru_cache(maxsize=256)  # a summary.csv asks for the same few quantiles thousands of times
def _t(conf: float, dof: int) -> float:
    from scipy.special import stdtrit  # scipy.stats.t.ppf's own routine, without importing scipy.stats (seconds)

    return float(stdtrit(dof, 0.5 + conf / 2.0))


def interval(values: Sequence[float], conf: float = 0.95) -> Interval:
    """Mean, standard error and the two-sided ``conf`` t-interval of finite ``values``."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(xs)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, math.nan, 0)
    mean = sum(xs) / n
    if n < 2:
        return Interval(mean, math.nan, math.nan, math.nan, 1)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    se = sd / math.sqrt(n)
    h = _t(conf, n - 1) * se
    return Interval(mean, se, mean - h, mean + h, n)


def paired(a: Mapping[int, float], b: Mapping[int, float], conf: float = 0.95) -> Interval:
    """Interval of ``a - b`` over the seeds both hold a finite value for."""
    diffs = [float(a[s]) - float(b[s]) for s in sorted(set(a) & set(b))
             if a[s] is not None and b[s] is not None and math.isfinite(float(a[s])) and math.isfinite(float(b[s]))]
    return interval(diffs, conf)


def distinguishable(a: Mapping[int, float], b: Mapping[int, float], conf: float = 0.95) -> bool:
    """True when the paired-difference interval excludes zero."""
    d = paired(a, b, conf)
    return d.n >= 2 and math.isfinite(d.lo) and (d.lo > 0.0 or d.hi < 0.0)
