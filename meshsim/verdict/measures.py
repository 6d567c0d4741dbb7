"""What ``meshsim verdict`` measures per candidate and size, and how each is
summarised over the held-out seeds (docs/verdict.md, "Measures").

Three kinds of measure:

* **proportion** -- a count of trials out of a count per run, pooled over the
  seeds (false isolations of the ever-healthy agents; missed episodes of the
  degradation episodes); the interval is the exact 95 % Clopper--Pearson
  interval of the pooled count. Agents of one run are not independent (a
  collapse isolates several at once), so the pooled interval is narrower than
  the truth when isolations cluster; ``P(...)`` over runs is the check that
  does not lean on that.
* **event** -- whether something happened in a run (any false isolation, any
  missed episode, a collapse): ``P(event)`` is the share of runs, with the
  Clopper--Pearson interval over runs (runs are independent).
* **mean** -- a number per run (false isolations, missed episodes, a delay),
  averaged over the seeds that have one, with the Student-t 95 % interval of
  the sweep (:func:`meshsim.sweep.stats.interval`); nulls (no detection, no
  reintegration) are left out and the count of seeds behind the mean says so.

Any number of ``summary.json`` named by a dotted path (``detection.missed``,
``accuracy.by_phase.degraded``) is a *mean* measure too.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

__all__ = ["Measure", "MEASURES", "EVENTS", "clopper_pearson", "runs_to_show", "per_run", "COLLAPSE_RULE"]

CONF = 0.95

#: the rule behind ``collapse.occurred`` (meshsim.observe.collapse; docs/outputs.md)
COLLAPSE_RULE = ("an ability collapses at task k when its holders that are present and healthy at k are not none and "
                 "every one of them is isolated at k (summary.json collapse.occurred: some ability collapsed at some "
                 "task)")


@dataclass(frozen=True)
class Measure:
    name: str
    kind: str  # proportion | mean
    label: str  # for the console and the report
    count: str  # summary path: the per-run value (mean), or the count (proportion)
    of: Optional[str] = None  # proportion: the summary path of the trials per run
    unit: str = ""


#: the verdict's own measures, by the name a constraint uses (in table order)
MEASURES: dict[str, Measure] = {m.name: m for m in (
    Measure("false_isolations_per_healthy", "proportion", "false isolations per healthy agent",
            "detection.false_isolations", "detection.ever_healthy_agents"),
    Measure("false_isolations", "mean", "false isolations per run", "detection.false_isolations"),
    Measure("missed", "mean", "missed detections per run", "detection.missed"),
    Measure("missed_per_episode", "proportion", "missed detections per episode", "detection.missed",
            "detection.episodes"),
    Measure("delay_outputs", "mean", "detection delay (own outputs)", "detection.delay_outputs_mean", unit="outputs"),
    Measure("delay_tasks", "mean", "detection delay (tasks)", "detection.delay_mean", unit="tasks"),
    Measure("reintegration_tasks", "mean", "reintegration delay (tasks)", "detection.reintegration_delay_mean",
            unit="tasks"),
)}

#: events a run has or not: ``P(name)`` (summary path, test)
EVENTS: dict[str, tuple[str, str]] = {
    "false_isolation": ("detection.false_isolations", "any false isolation"),
    "missed": ("detection.missed", "any missed detection"),
    "collapse": ("collapse.occurred", "collapse"),
}


def per_run(summary: dict[str, Any], path: str) -> Optional[float]:
    """The number at ``path`` of one run's summary (booleans as 0/1); None when missing, null or not finite."""
    from ..uncertainty.core import metric_value

    return metric_value(summary, path)


def clopper_pearson(k: int, n: int, conf: float = CONF) -> tuple[float, float]:
    """The exact (Clopper--Pearson) two-sided ``conf`` interval of a proportion ``k`` of ``n``."""
    from scipy.special import betaincinv

    if n <= 0:
        return math.nan, math.nan
    a = (1.0 - conf) / 2.0
    lo = 0.0 if k <= 0 else float(betaincinv(k, n - k + 1, a))
    hi = 1.0 if k >= n else float(betaincinv(k + 1, n - k, 1.0 - a))
    return lo, hi


def runs_to_show(bound: float, conf: float = CONF) -> Optional[int]:
    """Trials without a single event needed before the Clopper--Pearson upper bound falls to ``bound``
    (None when it never does: ``bound`` >= 1 holds at once, <= 0 never)."""
    if bound >= 1.0:
        return 0
    if bound <= 0.0:
        return None
    a = (1.0 - conf) / 2.0
    n = math.log(a) / math.log1p(-bound) - 1e-9
    return int(math.ceil(n)) if math.isfinite(n) else None  # (a bound this small is never shown)


# ------------------------------------------------------------------------------------ summaries over seeds

#: a run's numbers: (seed, {summary path: value or None})
Run = tuple[int, dict[str, Optional[float]]]


def _finite(x: Any) -> Optional[float]:
    return float(x) if x is not None and math.isfinite(float(x)) else None


def rate_of(measure: Measure, values: dict[str, Optional[float]]) -> Optional[float]:
    """One run's value of ``measure`` (a proportion's count / trials)."""
    x = values.get(measure.count)
    if measure.kind == "mean":
        return x
    n = values.get(measure.of or "")
    return None if x is None or not n else x / n


def proportion(runs: list[Run], measure: Measure) -> dict[str, Any]:
    """Pooled count / trials over the runs with both, and its Clopper--Pearson interval."""
    k = n = 0
    for _s, v in runs:
        x, t = v.get(measure.count), v.get(measure.of or "")
        if x is not None and t is not None:
            k += int(round(x))
            n += int(round(t))
    lo, hi = clopper_pearson(k, n)
    return {"estimate": _finite(k / n) if n else None, "lo": _finite(lo), "hi": _finite(hi), "count": k, "of": n,
            "interval": "clopper-pearson"}


def event(runs: list[Run], path: str) -> dict[str, Any]:
    """Share of runs where the number at ``path`` is > 0 (true), with its Clopper--Pearson interval over runs."""
    xs = [v.get(path) for _s, v in runs]
    n = sum(1 for x in xs if x is not None)
    k = sum(1 for x in xs if x is not None and x > 0)
    lo, hi = clopper_pearson(k, n)
    return {"estimate": _finite(k / n) if n else None, "lo": _finite(lo), "hi": _finite(hi), "count": k, "of": n,
            "interval": "clopper-pearson", "seeds": [s for s, v in runs if (v.get(path) or 0) > 0]}


def mean(runs: list[Run], path: str, floor: Optional[float] = None) -> dict[str, Any]:
    """Mean over the runs with a value and its Student-t 95 % interval (none with fewer than two); ``floor``:
    the least value the number can take (0 for counts and delays), where the interval is cut."""
    from ..sweep.stats import interval

    xs = [v.get(path) for _s, v in runs]
    iv = interval([x for x in xs if x is not None], CONF)
    lo = _finite(iv.lo)
    if lo is not None and floor is not None and lo < floor:
        lo = floor
    return {"estimate": _finite(iv.mean), "lo": lo, "hi": _finite(iv.hi), "n": iv.n, "interval": "student-t"}


def worst(runs: list[Run], key) -> tuple[Optional[int], Optional[float]]:
    """(seed, value) of the run with the largest ``key(values)`` (first seed on ties; nulls never worst)."""
    best: tuple[Optional[int], Optional[float]] = (None, None)
    for s, v in sorted(runs, key=lambda r: r[0]):
        x = key(v)
        if x is not None and (best[1] is None or x > best[1]):
            best = (s, x)
    return best
