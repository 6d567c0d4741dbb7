"""Statistics per sweep point over seeds: standard error, 95 % interval, and
paired differences on shared seeds (common random numbers: every point runs
the same seeds, so a difference between two points is measured seed by seed,
which removes the noise the seeds share).

Intervals are Student-t intervals on the seed mean (``mean ± t_{0.975, n-1} ·
sd / √n``); with one seed there is none (NaN). A metric that is a proportion
(an accuracy, a rate, a share: :func:`metric_bounds` ``(0, 1)``) gets a
Wilson score interval instead (:func:`proportion_interval`), which stays in
[0, 1] where the t-interval over few seeds does not (an accuracy of 0.57 over
two seeds: t gives −0.43…1.56). Where a rate's counts are in the rows
(:data:`PROPORTION_DENOMINATORS`), the interval also covers the Wilson score
interval of the pooled counts (:func:`pooled_proportion_interval`), so seeds
that agree (0.167 and 0.167 of 6 agents) do not give an interval of zero width
as if the rate were known exactly. Two points are *distinguishable* on a metric
when the paired-difference interval excludes 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping, Sequence

__all__ = ["Interval", "interval", "proportion_interval", "pooled_proportion_interval", "metric_interval",
           "is_proportion", "paired", "distinguishable", "clip", "metric_bounds", "all_equal",
           "PROPORTION_DENOMINATORS", "rate_counts"]


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


#: rates whose counts a run's summary holds: metric -> the column of its denominator (the numerator is
#: rate × denominator; observe/detection.py defines them)
PROPORTION_DENOMINATORS = {"detection.false_isolation_rate": "detection.ever_healthy_agents",
                           "detection.missed_rate": "detection.episodes",
                           "detection.never_degraded_isolated_rate": "detection.healthy_agents"}


def rate_counts(metric: str, rows: Sequence[Mapping]) -> list[tuple[int, int]] | None:
    """``[(successes, trials)]`` of a rate per row, from its denominator column
    (:data:`PROPORTION_DENOMINATORS`); None where the metric has none, or a row lacks it or does not give a
    whole count (then the seed-based interval alone applies)."""
    den = PROPORTION_DENOMINATORS.get(metric)
    if den is None:
        return None
    out = []
    for r in rows:
        try:
            x, n = float(r.get(metric)), float(r.get(den))  # type: ignore[arg-type]  # (None: TypeError)
        except (TypeError, ValueError):
            return None
        if not (math.isfinite(x) and math.isfinite(n)) or n < 1 or n != int(n):
            return None
        k = x * n
        if abs(k - round(k)) > 1e-6:
            return None
        out.append((int(round(k)), int(n)))
    return out


def pooled_proportion_interval(counts: Sequence[tuple[int, int]], conf: float = 0.95) -> Interval:
    """The Wilson score interval of the pooled counts ``[(successes, trials)]`` (every seed's agents or
    episodes together): never of zero width with trials > 0, and in [0, 1]. ``se``: the binomial one."""
    from scipy.special import ndtri

    k, n = sum(c[0] for c in counts), sum(c[1] for c in counts)
    if n <= 0:
        return Interval(math.nan, math.nan, math.nan, math.nan, 0)
    p = k / n
    z = float(ndtri(0.5 + conf / 2.0))
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Interval(p, math.sqrt(p * (1 - p) / n), max(0.0, centre - half), min(1.0, centre + half), len(counts))


def all_equal(iv: Interval) -> bool:
    """Two or more values, all the same: a t-interval of zero width that says nothing about certainty
    (written ``(n=2, all equal)``, not as an interval)."""
    return iv.n >= 2 and math.isfinite(iv.lo) and iv.lo == iv.hi


def is_proportion(metric: str) -> bool:
    """Whether a metric's values are proportions in [0, 1] (:func:`metric_bounds`)."""
    return metric_bounds(metric) == (0.0, 1.0)


def metric_interval(metric: str, values: Sequence[float], conf: float = 0.95,
                    counts: Sequence[tuple[int, int]] | None = None) -> Interval:
    """The interval a metric's seed values get: :func:`proportion_interval` for a proportion,
    else the t-interval (:func:`interval`). With ``counts`` (a rate's ``[(successes, trials)]`` behind
    ``values``, :func:`rate_counts`) whose pooled rate is the values' mean: the span of both that and
    :func:`pooled_proportion_interval`, so neither the seeds' spread nor the binomial noise of a few
    agents is left out (seeds that agree no longer give zero width)."""
    iv = proportion_interval(values, conf) if is_proportion(metric) else interval(values, conf)
    if counts and iv.n >= 2:
        pooled = pooled_proportion_interval(counts, conf)
        if pooled.n and math.isclose(pooled.mean, iv.mean, rel_tol=1e-9, abs_tol=1e-12):
            return Interval(iv.mean, iv.se, min(iv.lo, pooled.lo), max(iv.hi, pooled.hi), iv.n)
    return iv


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
