"""Statistics per sweep point over seeds: standard error, 95 % interval, and
paired differences on shared seeds (common random numbers: every point runs
the same seeds, so a difference between two points is measured seed by seed,
which removes the noise the seeds share).

Intervals are Student-t intervals on the seed mean (``mean ± t_{0.975, n-1} ·
sd / √n``); with one seed there is none (NaN). A metric that is a proportion
(an accuracy, a rate, a share: :func:`metric_bounds` ``(0, 1)``) gets a
Wilson score interval instead (:func:`proportion_interval`), which stays in
[0, 1] where the t-interval over few seeds does not (an accuracy of 0.57 over
two seeds: t gives −0.43…1.56). Two points are *distinguishable* on a metric
when the paired-difference interval excludes 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping, Sequence

__all__ = ["Interval", "interval", "proportion_interval", "metric_interval", "is_proportion", "paired",
           "distinguishable", "clip", "metric_bounds"]


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


def proportion_interval(values: Sequence[float], conf: float = 0.95) -> Interval:
    """Mean, standard error and a two-sided ``conf`` interval of the mean of per-seed proportions (each in
    [0, 1]) that stays in [0, 1]: the Wilson score interval at the effective sample size
    n_eff = p(1 − p) / se² (Korn & Graubard 1998: the binomial n whose variance equals the seeds' observed one),
    with the t quantile of n − 1 degrees of freedom. Far from 0 and 1 it is the t-interval (half-width ≈
    t·se); near them it is pulled inside, as Wilson's is. Identical seeds give a zero-width interval, as the
    t-interval does; one seed none (NaN). Values outside [0, 1]: the t-interval (:func:`interval`)."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if any(x < 0.0 or x > 1.0 for x in xs):
        return interval(xs, conf)
    n = len(xs)
    if n < 2:
        return interval(xs, conf)
    p = sum(xs) / n
    sd = math.sqrt(sum((x - p) ** 2 for x in xs) / (n - 1))
    se = sd / math.sqrt(n)
    if se == 0.0 or p <= 0.0 or p >= 1.0:
        return Interval(p, se, p, p, n)
    z = _t(conf, n - 1)
    m = p * (1.0 - p) / (se * se)  # effective sample size
    z2 = z * z / m
    centre = (p + z2 / 2.0) / (1.0 + z2)
    half = z * math.sqrt(p * (1.0 - p) / m + z * z / (4.0 * m * m)) / (1.0 + z2)
    return Interval(p, se, max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half)), n)


def is_proportion(metric: str) -> bool:
    """Whether a metric's values are proportions in [0, 1] (:func:`metric_bounds`)."""
    return metric_bounds(metric) == (0.0, 1.0)


def metric_interval(metric: str, values: Sequence[float], conf: float = 0.95) -> Interval:
    """The interval a metric's seed values get: :func:`proportion_interval` for a proportion,
    else the t-interval (:func:`interval`)."""
    return proportion_interval(values, conf) if is_proportion(metric) else interval(values, conf)


def paired(a: Mapping[int, float], b: Mapping[int, float], conf: float = 0.95) -> Interval:
    """Interval of ``a - b`` over the seeds both hold a finite value for."""
    diffs = [float(a[s]) - float(b[s]) for s in sorted(set(a) & set(b))
             if a[s] is not None and b[s] is not None and math.isfinite(float(a[s])) and math.isfinite(float(b[s]))]
    return interval(diffs, conf)


def distinguishable(a: Mapping[int, float], b: Mapping[int, float], conf: float = 0.95) -> bool:
    """True when the paired-difference interval excludes zero."""
    d = paired(a, b, conf)
    return d.n >= 2 and math.isfinite(d.lo) and (d.lo > 0.0 or d.hi < 0.0)


#: metrics that are shares (to [0, 1]) and counts or delays (>= 0), by the last part of their name: a
#: t-interval over few seeds can leave that range (0.111 [-0.128, 0.350]), so search outputs clip it and say so
_SHARE_NAMES = ("accuracy", "iaa", "faa", "ra", "h_majority", "collapse")
_NONNEG_PARTS = ("delay", "missed", "false_isolations", "isolated", "detected", "count", "tokens", "calls",
                 "messages", "bytes", "wall", "cpu", "outputs", "unanswered", "tasks")


def metric_bounds(metric: str) -> tuple[float, float]:
    """The range a metric's values can take: (0, 1) for a rate or share (a name ending in ``rate`` or
    ``_share``, accuracies, IAA, FAA, RA, H-majority, collapse), (-1, 1) for BFTI (FAA − IAA), (0, inf) for
    counts and delays, else unbounded."""
    last = metric.rsplit(".", 1)[-1].lower()
    if last == "bfti" or last.startswith("bfti_"):
        return (-1.0, 1.0)
    if last.endswith("rate") or last.endswith("_share") or last.startswith("p_") or \
            last in _SHARE_NAMES or metric.lower().startswith("accuracy."):
        return (0.0, 1.0)
    if any(p in last for p in _NONNEG_PARTS):
        return (0.0, math.inf)
    return (-math.inf, math.inf)


def clip(iv: Interval, bounds: tuple[float, float]) -> Interval:
    """``iv`` with its ends moved into ``bounds`` (the mean and se unchanged)."""
    lo, hi = bounds
    if not math.isfinite(iv.lo):
        return iv
    return Interval(iv.mean, iv.se, min(max(iv.lo, lo), hi), max(min(iv.hi, hi), lo), iv.n)
