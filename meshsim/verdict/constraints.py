"""The constraint grammar of ``meshsim verdict`` and how each form is judged
(docs/verdict.md, "Constraints").

::

    CONSTRAINT := TERM OP NUMBER          OP := <=  |  >=  |  ==
    TERM       := P(EVENT)                share of held-out runs with EVENT
                | max(METRIC) | min(METRIC)   the worst / best held-out run
                | mean(METRIC)            the point estimate over the seeds, no interval
                | METRIC                  the estimate's 95 % bound (== : every run)
    EVENT      := collapse | false_isolation | missed
    METRIC     := a verdict measure (false_isolations_per_healthy, false_isolations, missed,
                  missed_per_episode, delay_outputs, delay_tasks, reintegration_tasks)
                | a dotted path to a number of summary.json (detection.missed, accuracy.overall)

Judging, on the held-out runs at the profile's own values:

* ``P(EVENT) <= V`` passes when the 95 % Clopper--Pearson **upper** bound of
  the share of runs is <= V (``>=``: the lower bound >= V); ``==`` is refused.
* ``METRIC <= V`` passes when the estimate's 95 % upper bound is <= V
  (Clopper--Pearson for a proportion measure, Student-t over seeds for a
  mean; one seed has no bound and fails); ``>=`` the lower bound;
  ``METRIC == V``: every run's value equals V (a run without one fails).
* ``max(METRIC) <= V``: every run's value <= V (``min(METRIC) >= V``: every
  run's >= V); ``mean(METRIC) OP V`` compares the point estimate.

A bound on the safe side of V is what PASS means: with no event in n runs the
upper bound is 1 - 0.025^(1/n), so ``P(collapse) <= 0.01`` needs 368 runs
without a collapse; the verdict says how many when it fails for want of runs.
"""
from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Any, Optional

from ..core.errors import InputError
from .measures import EVENTS, MEASURES, Run, event, mean, proportion, rate_of, runs_to_show, worst

__all__ = ["Constraint", "parse_constraint", "judge", "holds_at", "DEFAULT_CONSTRAINTS", "GRAMMAR"]

#: what a verdict checks when no --constraint is given (issue 29)
DEFAULT_CONSTRAINTS = ("detection.missed==0", "false_isolations_per_healthy<=0.01", "P(collapse)<=0.01")
GRAMMAR = ("TERM OP NUMBER with OP <=, >= or ==; TERM is P(EVENT), max(METRIC), min(METRIC), mean(METRIC) or METRIC "
           "(docs/verdict.md)")
_RE = re.compile(r"^\s*(?:(P|max|min|mean)\s*\(\s*([^()]*?)\s*\)|([^<>=!()\s]+))\s*(<=|>=|==|<|>|=|!=)\s*(\S*)\s*$")
_PATH = re.compile(r"^[A-Za-z_][\w\-]*(\.[A-Za-z0-9_\-]+)*$")
EPS = 1e-12


@dataclass(frozen=True)
class Constraint:
    form: str  # P | max | min | mean | bound
    target: str  # an event, a measure or a summary path
    op: str
    value: float

    @property
    def text(self) -> str:
        lhs = self.target if self.form == "bound" else f"{self.form}({self.target})"
        return f"{lhs}{self.op}{_num(self.value)}"

    @property
    def path(self) -> Optional[str]:
        """The summary path this reads when it is not a verdict measure or event."""
        return None if self.form == "P" or self.target in MEASURES else self.target

    @property
    def every_run(self) -> bool:
        """Whether it is judged run by run (each held-out run must hold)."""
        return (self.form == "bound" and self.op == "==") or (self.form, self.op) in (("max", "<="), ("min", ">="))

    def judged_on(self) -> str:
        """What PASS / FAIL is decided on (reads after 'judged on')."""
        if self.form == "P":
            return f"the 95 % Clopper-Pearson {'upper' if self.op == '<=' else 'lower'} bound over runs"
        if self.every_run:
            return "every run"
        if self.form in ("max", "min"):
            return f"the {'largest' if self.form == 'max' else 'smallest'} run"
        if self.form == "mean":
            return "the point estimate"
        kind = "Clopper-Pearson" if MEASURES.get(self.target, None) and MEASURES[self.target].kind == "proportion" \
            else "Student-t"
        return f"the 95 % {kind} {'upper' if self.op == '<=' else 'lower'} bound"


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(float(v))


def parse_constraint(text: str) -> Constraint:
    """One ``--constraint``; an :class:`InputError` (one line) names what is wrong."""
    where = {"field": "--constraint", "value": text}
    m = _RE.match(text or "")
    if not m:
        raise InputError(f"expected {GRAMMAR}, e.g. 'P(collapse)<=0.01'", **where)
    form, inner, bare, op, num = m.groups()
    if op in ("<", ">", "=", "!="):
        raise InputError(f"unknown operator '{op}'; use <=, >= or ==", **where)
    try:
        value = float(num)
    except ValueError:
        raise InputError(f"the bound must be a number (got '{num}')" if num else "missing the bound after "
                         f"'{op}'", **where) from None
    if not math.isfinite(value):
        raise InputError("the bound must be finite", **where)
    if form == "P":
        if inner not in EVENTS:
            raise InputError(f"unknown event '{inner}'; choose one of {', '.join(EVENTS)}", **where)
        if op == "==":
            raise InputError("P(EVENT) is judged on its confidence bound: use <= or >=", **where)
        if not 0.0 <= value <= 1.0:
            raise InputError("a probability bound lies in [0, 1]", **where)
        return Constraint("P", inner, op, value)
    target = inner if form else bare
    if not target:
        raise InputError(f"{form}() needs a metric inside", **where)
    if target in EVENTS and target not in MEASURES and "." not in target:
        raise InputError(f"'{target}' is an event: write P({target})", **where)
    if "." not in target and target not in MEASURES:
        close = difflib.get_close_matches(target, list(MEASURES) + [f"P({e})" for e in EVENTS], n=1)
        raise InputError(f"unknown measure '{target}'"
                         + (f" (did you mean {close[0]}?)" if close else "")
                         + f"; choose one of {', '.join(MEASURES)} or a dotted summary.json path", **where)
    if "." in target and not _PATH.match(target):
        raise InputError(f"malformed summary path '{target}'", **where)
    return Constraint(form or "bound", target, op, value)


def _holds(x: Optional[float], op: str, v: float) -> bool:
    if x is None or not math.isfinite(x):
        return False
    if op == "<=":
        return x <= v + EPS
    if op == ">=":
        return x >= v - EPS
    return abs(x - v) <= EPS


def _per_run(c: Constraint, values: dict[str, Optional[float]]) -> Optional[float]:
    m = MEASURES.get(c.target)
    return rate_of(m, values) if m is not None else values.get(c.target)


def judge(c: Constraint, runs: list[Run]) -> dict[str, Any]:
    """PASS / FAIL of ``c`` on ``runs``, with the number judged, the estimate, the interval, why, and the seeds
    that break it (or the worst seed)."""
    out: dict[str, Any] = {"constraint": c.text, "judged_on": c.judged_on(), "every_run": c.every_run}
    bad: list[int] = []
    if c.form == "P":
        st = event(runs, EVENTS[c.target][0])
        judged = st["hi"] if c.op == "<=" else st["lo"]
        why = f"{st['count']} of {st['of']} runs; {'upper' if c.op == '<=' else 'lower'} bound {_g(judged)}"
        bad = st["seeds"] if c.op == "<=" else []
        out.update(estimate=st["estimate"], lo=st["lo"], hi=st["hi"])
        ok = _holds(judged, c.op, c.value)
        if not ok and c.op == "<=" and st["count"] == 0:
            need = runs_to_show(c.value)
            why += (f"; {need} runs without one would show <= {_g(c.value)}" if need else
                    "; no number of runs can show <= 0")
    elif c.form in ("max", "min") or (c.form == "bound" and c.op == "=="):
        xs = [(s, _per_run(c, v)) for s, v in runs]
        vals = [x for _s, x in xs if x is not None]
        every = c.every_run
        if c.form == "bound":  # == : every run equals the bound (a run without a value does not)
            bad = [s for s, x in xs if not _holds(x, "==", c.value)]
            judged = next((x for s, x in xs if s in bad), c.value) if xs else None
            ok = bool(xs) and not bad
        else:
            judged = (max(vals) if c.form == "max" else min(vals)) if vals else None
            ok = _holds(judged, c.op, c.value)
            bad = [s for s, x in xs if x is not None and not _holds(x, c.op, c.value)] if every else \
                ([] if ok else [s for s, x in xs if x is not None and x == judged])
        missing = sum(1 for _s, x in xs if x is None)
        why = (f"{len(xs) - len(bad)} of {len(xs)} runs hold" if every else f"{c.form} {_g(judged)}") \
            + (f" ({missing} without a value)" if missing else "")
        st = _stat(c, runs)
        out.update(estimate=st["estimate"], lo=st["lo"], hi=st["hi"])
    else:
        st = _stat(c, runs)
        if c.form == "mean":
            judged = st["estimate"]
            why = "point estimate"
        else:
            judged = st["hi"] if c.op == "<=" else st["lo"]
            why = f"{'upper' if c.op == '<=' else 'lower'} bound {_g(judged)}"
            if st.get("interval") == "clopper-pearson":
                why = f"{st['count']} of {st['of']}; " + why
                if st["count"] == 0 and c.op == "<=" and not _holds(judged, c.op, c.value):
                    need = runs_to_show(c.value)
                    if need:
                        why += f"; {need} trials without one would show <= {_g(c.value)}"
            elif judged is None:
                why = f"{st.get('n', 0)} value{'s' if st.get('n', 0) != 1 else ''}: no interval"
        ok = _holds(judged, c.op, c.value)
        out.update(estimate=st["estimate"], lo=st["lo"], hi=st["hi"])
        if not ok:
            def key(v: dict[str, Optional[float]]) -> Optional[float]:
                x = _per_run(c, v)
                return None if x is None else _sign(c) * x

            s, _x = worst(runs, key)
            bad = [s] if s is not None else []
    out.update(value=judged, result="PASS" if ok else "FAIL", why=why, seeds=sorted(bad))
    return out


def _sign(c: Constraint) -> float:
    return 1.0 if c.op != ">=" else -1.0


def _stat(c: Constraint, runs: list[Run]) -> dict[str, Any]:
    m = MEASURES.get(c.target)
    if m is not None and m.kind == "proportion":
        return proportion(runs, m)
    return mean(runs, m.count, 0.0) if m is not None else mean(runs, c.target)


def holds_at(c: Constraint, runs: list[Run]) -> Optional[bool]:
    """Whether ``c``'s point form holds on ``runs`` (an assumption sample at its few seeds): the share or the
    estimate against the bound (no interval), every run for ``==``, ``max`` and ``min``; None without data."""
    if not runs:
        return None
    if c.form == "P":
        st = event(runs, EVENTS[c.target][0])
        return None if st["estimate"] is None else _holds(st["estimate"], c.op, c.value)
    if c.form in ("max", "min") or (c.form == "bound" and c.op == "=="):
        xs = [_per_run(c, v) for _s, v in runs]
        if c.form == "max":
            vals = [x for x in xs if x is not None]
            return _holds(max(vals), c.op, c.value) if vals else None
        if c.form == "min":
            vals = [x for x in xs if x is not None]
            return _holds(min(vals), c.op, c.value) if vals else None
        return all(_holds(x, "==", c.value) for x in xs)
    st = _stat(c, runs)
    return None if st["estimate"] is None else _holds(st["estimate"], c.op, c.value)


def _g(v: Any) -> str:
    return "-" if v is None else f"{v:.3g}"
