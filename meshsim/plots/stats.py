"""What the figures and tables show, computed from a run folder's records (pure Python).

Ground-truth degradation intervals, inferred state series, self-healing marks
(MeshHeal Sec. 3.2), rolling review scores, and the per-phase and per-agent
tables (MeshHeal Tab. 2-3) as :class:`Stat` (mean ± sample std over seeds).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from .folder import RunFolder, _as_folder, _as_runset, _order, _summary_agents


STATES = ("normal", "watched", "isolated")


def degraded_intervals(run: Any) -> dict[str, list[tuple[int, int]]]:
    """Ground truth: per agent, [b, r) task intervals of injected degradation.

    From ``summary.json`` (``agents.<id>`` and its ``intervals``), completed by
    the ``degraded`` flag of ``reviews.jsonl`` rows for agents the summary does
    not list. ``r`` is N + 1 when the agent never recovered.
    """
    rf = _as_folder(run)
    n = rf.n_tasks
    out: dict[str, list[tuple[int, int]]] = {}
    for a, info in _summary_agents(rf.summary).items():
        per = info.get("intervals") or [info]
        spans = []
        for p in per:
            b = p.get("degraded_at")
            if isinstance(b, int):
                r = p.get("recovered_at")
                spans.append((b, r if isinstance(r, int) else n + 1))
        if spans:
            out[a] = spans
    if rf.has("reviews.jsonl"):
        flags: dict[str, list[tuple[int, bool]]] = {}
        for agent, rows in rf.review_index().items():
            if agent not in out:
                flags[agent] = [(r["task"], bool(r.get("degraded"))) for r in rows]
        for a, fl in flags.items():
            fl.sort()
            spans, start = [], None
            for k, d in fl:
                if d and start is None:
                    start = k
                elif not d and start is not None:
                    spans.append((start, k))
                    start = None
            if start is not None:
                spans.append((start, n + 1))
            if spans:
                out[a] = spans
    return {a: out[a] for a in _order(out)}


def state_series(run: Any, agent: str) -> list[str]:
    """The inferred state of ``agent`` at every task (index 0..N+1; a change
    recorded at task k holds from task k on)."""
    rf = _as_folder(run)
    n = rf.n_tasks
    series = ["normal"] * (n + 2)
    cur, k0 = "normal", 0
    for s in rf.states():
        if s["agent"] != agent:
            continue
        k = max(0, min(int(s["task"]), n + 1))
        for i in range(k0, k):
            series[i] = cur
        cur, k0 = s["new"], k
    for i in range(k0, n + 2):
        series[i] = cur
    return series


def _spans(series: Sequence[str], lo: int = 1) -> list[tuple[int, int, str]]:
    """Runs of equal values: (first, last + 1, value), from index ``lo``."""
    out, start = [], lo
    for i in range(lo + 1, len(series) + 1):
        if i == len(series) or series[i] != series[start]:
            out.append((start, i, series[start]))
            start = i
    return out


def healing_marks(run: Any, agent: str) -> list[dict[str, Any]]:
    """Per degradation interval of ``agent``: b, r, c (isolated_at), u
    (reintegrated_at), delays and closure.

    Taken from ``summary.json`` when it lists the agent; otherwise computed
    from ``states.jsonl`` with the same definition (Sec. 3.2).
    """
    rf = _as_folder(run)
    info = _summary_agents(rf.summary).get(agent)
    if info is not None:
        per = info.get("intervals") or [info]
        return [dict(p) for p in per if isinstance(p.get("degraded_at"), int)]
    from ..observe.detection import self_healing

    n = rf.n_tasks
    states = rf.states()
    return [self_healing(states, b, r, n, agent) for b, r in degraded_intervals(rf).get(agent, [])]


def _rolling(values: Sequence[float], w: int) -> list[float]:
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= w:
            acc -= values[i - w]
        out.append(acc / min(i + 1, w))
    return out


#: at most this many task columns for the reference band: the figure is 1000 px
#: wide, so a 48k-task run is sampled (every 25th task) instead of computed per task
BAND_COLUMNS = 2000


def band_columns(n: int) -> "Any":
    """Task indices 0..n+1 at which the reference band is computed (all of them up to
    :data:`BAND_COLUMNS` tasks, else evenly spaced with the first and last task)."""
    import numpy as np

    if n <= BAND_COLUMNS:
        return np.arange(n + 2)
    step = -(-n // BAND_COLUMNS)
    return np.unique(np.concatenate(([0], np.arange(1, n + 1, step), [n, n + 1])))


def _score_curves(rf: RunFolder, window: int):
    """numpy arrays at the task columns of :func:`band_columns`: the columns,
    agents, [agent x column] rolling mean review score (the last one at or
    before the task, NaN before the first review) and [agent x column]
    inferred state code. Built per agent from its reviews and state changes
    (no per-task Python loop), so a 576-agent, 48k-task run stays fast."""
    import numpy as np

    key = f"_curves{window}"
    if key in rf._cache:
        return rf._cache[key]
    agents = rf.agents()
    n = rf.n_tasks
    cols = band_columns(n)
    curves = np.full((len(agents), len(cols)), np.nan)
    codes = np.zeros((len(agents), len(cols)), dtype=np.int8)
    code = {s: i for i, s in enumerate(STATES)}
    changes: dict[str, list[tuple[int, int]]] = {}
    for st in rf.states():  # sorted by (task, t): the last change at or before a task holds
        changes.setdefault(st["agent"], []).append((max(0, min(int(st["task"]), n + 1)), code.get(st["new"], 0)))
    for i, a in enumerate(agents):
        pts = sorted(((int(r["task"]), float(r["q"])) for r in rf.agent_reviews(a) if r.get("q") is not None),
                     key=lambda p: p[0])
        if pts:
            roll = _rolling([q for _, q in pts], window)
            keep = [(k, m) for (k, _), m in zip(pts, roll) if 0 <= k <= n + 1]
            if keep:
                ks = np.array([k for k, _ in keep])
                ms = np.array([m for _, m in keep])
                j = np.searchsorted(ks, cols, side="right") - 1
                curves[i] = np.where(j >= 0, ms[np.maximum(j, 0)], np.nan)
        ch = changes.get(a)
        if ch:
            ks = np.array([k for k, _ in ch])
            vs = np.array([v for _, v in ch], dtype=np.int8)
            j = np.searchsorted(ks, cols, side="right") - 1
            codes[i] = np.where(j >= 0, vs[np.maximum(j, 0)], 0)
    rf._cache[key] = (cols, agents, curves, codes)
    return rf._cache[key]


def _reference_band(rf: RunFolder, agent: str, window: int):
    """(task columns, 10th, 90th percentile): per task, the rolling mean score of
    the other agents that are in the normal state at that task."""
    import numpy as np

    cols, agents, curves, codes = _score_curves(rf, window)
    mask = np.ones(len(agents), dtype=bool)
    if agent in agents:
        mask[agents.index(agent)] = False
    c = np.where(codes[mask] == 0, curves[mask], np.nan)
    ok = (~np.isnan(c)).sum(axis=0) >= 2
    lo = np.full(c.shape[1], np.nan)
    hi = np.full(c.shape[1], np.nan)
    if ok.any():
        lo[ok] = np.nanpercentile(c[:, ok], 10, axis=0)
        hi[ok] = np.nanpercentile(c[:, ok], 90, axis=0)
    return cols, lo, hi


def _fmt_num(x: float, digits: int) -> str:
    return f"{x:.{digits}f}"


@dataclass
class Stat:
    mean: Optional[float]
    std: Optional[float] = None
    min: Optional[float] = None
    max: Optional[float] = None
    n: int = 0
    missing: int = 0

    @classmethod
    def of(cls, entry: Optional[dict]) -> "Stat":
        if not entry or "mean" not in entry:
            return cls(None, n=int((entry or {}).get("n", 0)), missing=int((entry or {}).get("missing", 0)))
        return cls(entry["mean"], entry.get("std"), entry.get("min"), entry.get("max"), int(entry.get("n", 1)),
                   int(entry.get("missing", 0)))

    @classmethod
    def from_values(cls, values: list[Any]) -> "Stat":
        nums = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        missing = sum(v is None for v in values)
        if not nums:
            return cls(None, n=0, missing=missing)
        return cls(statistics.fmean(nums), statistics.stdev(nums) if len(nums) > 1 else 0.0,
                   min(nums), max(nums), len(nums), missing)

    def fmt(self, digits: int = 3, scale: float = 1.0, spread: bool = False) -> str:
        """``mean ± std`` (one seed: the value); with ``spread`` also ``(min–max)``."""
        if self.mean is None:
            return "–"
        m = self.mean * scale
        if self.n <= 1:
            return f"{m:.0f}" if digits <= 1 and float(m).is_integer() else _fmt_num(m, digits)
        s = f"{_fmt_num(m, digits)} ± {_fmt_num((self.std or 0.0) * scale, digits)}"
        if spread and self.min is not None:
            s += f" ({_fmt_num(self.min * scale, 0 if digits <= 1 else digits)}–" \
                 f"{_fmt_num(self.max * scale, 0 if digits <= 1 else digits)})"
        return s


def phase_stats(run: Any) -> list[dict[str, Any]]:
    """Per phase (scenario order) and overall: accuracy, tokens and calls per
    task as :class:`Stat` (mean ± sample std over seeds, from ``aggregate.json``;
    a single-seed folder gives its own values)."""
    rs = _as_runset(run)
    rf = rs.first
    rows = []
    for name, lo, hi in rf.phases():
        rows.append({"phase": name, "tasks": f"{lo}–{hi}", "n_tasks": hi - lo + 1,
                     "accuracy": Stat.of(rs.stat(f"accuracy.by_phase.{name}")),
                     "tokens": Stat.of(rs.stat(f"tokens_per_task_by_phase.{name}")),
                     "calls": Stat.of(rs.stat(f"calls_per_task_by_phase.{name}"))})
    n = rf.n_tasks
    rows.append({"phase": "all", "tasks": f"1–{n}", "n_tasks": n,
                 "accuracy": Stat.of(rs.stat("accuracy.overall")),
                 "tokens": Stat.of(rs.stat("tokens_per_task")),
                 "calls": Stat.of(rs.stat("calls_per_task"))})
    return rows


def healing_stats(run: Any) -> list[dict[str, Any]]:
    """Per degraded agent (and interval): b, r, detection delay, closure count
    and reintegration delay over seeds (Tab. 3b). The first interval comes
    from ``aggregate.json``; later intervals of re-degraded agents from the
    seeds' summaries."""
    rs = _as_runset(run)
    agents: dict[str, int] = {}
    for s in rs.summaries():
        for a, info in _summary_agents(s).items():
            agents[a] = max(agents.get(a, 1), len(info.get("intervals") or [info]))
    n_seeds = len(rs.runs)
    out = []
    for a in _order(agents):
        for k in range(agents[a]):
            if k == 0:
                det = Stat.of(rs.stat(f"agents.{a}.detection_delay"))
                rein = Stat.of(rs.stat(f"agents.{a}.reintegration_delay"))
                b = Stat.of(rs.stat(f"agents.{a}.degraded_at"))
                r = Stat.of(rs.stat(f"agents.{a}.recovered_at"))
                clo = rs.stat(f"agents.{a}.closure") or {}
                closure, n = int(clo.get("true", 0)), int(clo.get("n", n_seeds))
                # an agent undetected in every seed has no numeric delay entry at all
                if det.mean is None:
                    det.missing = n
            else:
                pers = [(_summary_agents(s).get(a, {}).get("intervals") or [])[k:k + 1] for s in rs.summaries()]
                pers = [p[0] for p in pers if p]
                det = Stat.from_values([p.get("detection_delay") for p in pers])
                rein = Stat.from_values([p.get("reintegration_delay") for p in pers])
                b = Stat.from_values([p.get("degraded_at") for p in pers])
                r = Stat.from_values([p.get("recovered_at") for p in pers])
                closure, n = sum(bool(p.get("closure")) for p in pers), len(pers)
            out.append({"agent": a, "interval": k + 1, "degraded_at": b, "recovered_at": r,
                        "detection_delay": det, "closure": closure, "seeds": n,
                        "missed": det.missing, "reintegration_delay": rein})
    return out


def default_agents(run: Any, limit: int = 4) -> list[str]:
    """Degraded agents, then falsely isolated ones; else the first agents."""
    return choose_agents(run, limit)[0]


def choose_agents(run: Any, limit: int = 4) -> tuple[list[str], Optional[str]]:
    """The agents a figure shows by default (:func:`default_agents`) and, when
    that is a subset, a note saying which and how they were chosen (figures
    print it, so a 96-agent run's timeline does not silently show 4 of 32)."""
    rf = _as_folder(run)
    degraded = list(degraded_intervals(rf))  # natural order
    false = []
    for s in rf.states():  # in order of isolation
        if s["new"] == "isolated" and s["agent"] not in degraded and s["agent"] not in false:
            false.append(s["agent"])
    picks = degraded + false
    if not picks:
        everyone = rf.agents()
        chosen = everyone[:limit]
        note = None if len(everyone) <= limit else \
            f"showing {limit} of {len(everyone)} agents (none degraded or isolated): the first {limit} by name"
        return chosen, note
    chosen = picks[:limit]
    if len(picks) <= limit:
        return chosen, None
    if len(degraded) >= limit:
        note = f"showing {limit} of {len(degraded)} degraded agents: the first {limit} by name"
        if false:
            note += f" ({len(false)} falsely isolated not shown)"
    else:
        k = limit - len(degraded)
        note = (f"showing all {len(degraded)} degraded agents and {k} of {len(false)} falsely isolated "
                "ones: the first isolated")
    return chosen, note
