"""Coalition-size curves of Byzantine MeshHeal attacks (issue 20, docs/adversarial.md).

Reads the ``results.csv`` of ``meshsim sweep`` folders over a coalition size
(``events.N.count``) and draws, per size, the share of seeds in which the
attack succeeded, with a Wilson 95% interval (few seeds: a proportion's
interval, not a t-interval), and the baseline without liars at size 0.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from .canvas import CURVE_COLOR, _new_figure

__all__ = ["read_sweep", "success_by_size", "coalition_figure", "coalition96_docs_figure", "wilson"]


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion k/n (Wilson 1927)."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def read_sweep(folder: str | Path) -> list[dict[str, str]]:
    with open(Path(folder) / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


def _num(v: Any) -> Optional[float]:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def success_by_size(rows: Sequence[dict], size_col: str,
                    success: Callable[[dict], bool]) -> dict[int, tuple[int, int]]:
    """size -> (successful seeds, seeds)."""
    out: dict[int, list[int]] = {}
    for r in rows:
        size = _num(r.get(size_col))
        if size is None:
            continue
        k = out.setdefault(int(size), [0, 0])
        k[0] += int(bool(success(r)))
        k[1] += 1
    return {s: (a, b) for s, (a, b) in sorted(out.items())}


def _curve(ax, c: dict[str, Any], shift: float) -> None:
    """A proportion curve (``data``: size -> (k, n), Wilson interval) or a mean
    curve (``values``: size -> list, t-interval of :func:`meshsim.sweep.stats.interval`)."""
    from ..sweep.stats import interval

    if "values" in c:
        xs = sorted(c["values"])
        iv = [interval(c["values"][x]) for x in xs]
        ps = [i.mean for i in iv]
        lo = [0.0 if math.isnan(i.lo) else i.mean - i.lo for i in iv]
        hi = [0.0 if math.isnan(i.hi) else i.hi - i.mean for i in iv]
        ls = ":"
    else:
        data = c["data"]
        xs = sorted(data)
        ps = [data[x][0] / data[x][1] for x in xs]
        lo = [p - wilson(*data[x])[0] for x, p in zip(xs, ps)]
        hi = [wilson(*data[x])[1] - p for x, p in zip(xs, ps)]
        ls = "-"
    ax.errorbar([x + shift for x in xs], ps, yerr=[lo, hi], color=c.get("color", CURVE_COLOR),
                marker=c.get("marker", "o"), capsize=3, lw=1.6, ls=ls, label=c["label"])


def coalition_figure(panels: Sequence[dict[str, Any]], ax=None):
    """One axes per panel: ``{"title", "xlabel", "curves": [{"label", "data", "color", "marker"}]}``
    where ``data`` is size -> (successes, seeds); a dashed line at P = 0.5."""
    if ax is None:
        fig = _new_figure(3.6)
        axes = [fig.add_subplot(1, len(panels), i + 1) for i in range(len(panels))]
    else:
        axes = list(ax) if isinstance(ax, (list, tuple)) else [ax]
        fig = axes[0].figure
    for a, panel in zip(axes, panels):
        k = len(panel["curves"])
        for i, c in enumerate(panel["curves"]):
            _curve(a, c, 0.08 * (i - (k - 1) / 2))  # side by side: intervals of equal shares stay visible
        a.axhline(0.5, ls="--", lw=0.8, color="#868e96")
        a.set_ylim(-0.04, 1.04)
        a.set_xlabel(panel["xlabel"], fontsize=9)
        a.set_ylabel(panel.get("ylabel", "share of seeds"), fontsize=9)
        a.set_title(panel["title"], fontsize=9)
        xs = sorted({x for c in panel["curves"] for x in c.get("data", c.get("values", {}))})
        a.set_xticks(xs)
        a.grid(alpha=0.25)
        a.legend(fontsize=7.5, loc=panel.get("legend", "best"), frameon=False)
    return fig


def _run_summaries(folder: str | Path) -> list[dict]:
    """summary.json of every seed of a ``meshsim run`` folder (seed-N/ or a single run)."""
    import json

    root = Path(folder)
    files = sorted(root.glob("seed-*/summary.json")) or [root / "summary.json"]
    return [json.loads(f.read_text()) for f in files]


def _first_isolations(folder: str | Path, agent: str) -> list[Optional[int]]:
    """Per seed of a run folder, the first task at which ``agent`` changed to isolated."""
    from ..io.records import read_records

    root = Path(folder)
    dirs = sorted(root.glob("seed-*")) or [root]
    out = []
    for d in dirs:
        rows = read_records(d, "states.jsonl")
        out.append(next((r["task"] for r in rows if r["agent"] == agent and r["new"] == "isolated"), None))
    return out


def coalition_docs_figure(frame_sweep: str | Path, shield_sweep: str | Path, frame_base: str | Path,
                          shield_base: str | Path, horizon: int = 100, target: str = "A1"):
    """docs/img/adversarial-coalition.png: framing and shielding success against
    coalition size on the six-agent complete graph (sweeps of frame-6.yaml over
    ``events.0.count`` and shield-6.yaml over ``events.1.count``; the baselines are
    the same scenarios without liars, at size 0)."""
    fr = read_sweep(frame_sweep)
    sh = read_sweep(shield_sweep)
    iso = f"adversarial.framing.agents.{target}.isolated_at"
    start = "adversarial.framing.from_task"

    def soon(r):
        c, s0 = _num(r.get(iso)), _num(r.get(start))
        return c is not None and s0 is not None and c - s0 <= horizon

    def at_all(r):
        return _num(r.get(iso)) is not None

    frame_soon = success_by_size(fr, "events.0.count", soon)
    frame_any = success_by_size(fr, "events.0.count", at_all)
    base = _run_summaries(frame_base)
    # without liars: the first isolation of the target while healthy (detection.falsely_isolated lists it)
    b_any = sum(target in s["detection"]["falsely_isolated"] for s in base)
    frame_any = {0: (b_any, len(base)), **frame_any}
    b_soon = _first_isolations(frame_base, target)
    frame_soon = {0: (sum(1 for x in b_soon if x is not None and x <= horizon + 1), len(b_soon)), **frame_soon}
    shield_one = success_by_size(sh, "events.1.count", lambda r: (_num(r.get("adversarial.shielding.any_shielded")) or 0) > 0)
    acc: dict[int, list[float]] = {}
    for r in sh:
        v = _num(r.get("accuracy.by_phase.degraded"))
        if v is not None:
            acc.setdefault(int(float(r["events.1.count"])), []).append(v)
    sb = _run_summaries(shield_base)
    not_iso = [[s["agents"][a]["isolated_at"] is None for a in sorted(s["agents"])] for s in sb]
    shield_one = {0: (sum(any(x) for x in not_iso), len(sb)), **shield_one}
    acc = {0: [x["accuracy"]["by_phase"]["degraded"] for x in sb], **acc}
    panels = [
        {"title": f"Framing the healthy {target} (6 agents, complete graph, 504 tasks)",
         "xlabel": "framing coalition size (liars drawn per seed)",
         "curves": [{"label": f"{target} isolated within {horizon} tasks of the attack", "data": frame_soon,
                     "color": "#c92a2a", "marker": "o"},
                    {"label": f"{target} isolated at any time", "data": frame_any, "color": "#868e96",
                     "marker": "s"}], "legend": "lower right"},
        {"title": "Shielding the degraded A3, A5 (degrade at task 253 of 504)",
         "xlabel": "shielding coalition size (liars drawn per seed)",
         "curves": [{"label": "at least one degraded agent never isolated", "data": shield_one,
                     "color": "#1971c2", "marker": "o"},
                    {"label": "degraded-phase accuracy (mean, 95% t-interval)", "values": acc,
                     "color": "#2b8a3e", "marker": "D"}],
         "legend": "upper center", "ylabel": "share of seeds / accuracy"},
    ]
    return coalition_figure(panels)


#: the defences of the 96-agent coalition sweeps, as sweep-folder suffixes (docs/adversarial.md)
DEFENCES_96 = (("none", "no defence", "#212529", "o"), ("trim1", "trim_f 1", "#1971c2", "s"),
               ("k2", "min_reviewers 2", "#e8590c", "^"), ("cred", "credibility exclude", "#2b8a3e", "v"),
               ("all", "all three", "#c92a2a", "D"))


def _isolated_during(states: list[dict], agent: str, start: int) -> bool:
    """Whether ``agent`` is isolated at some task ≥ ``start`` (already isolated then counts)."""
    state = "normal"
    for s in states:
        if s["agent"] != agent:
            continue
        if s["task"] >= start and (s["new"] == "isolated" or state == "isolated"):
            return True
        state = s["new"]
    return state == "isolated"


def _baseline_by_graph(folder: Path, hit: Callable[[list[dict]], bool]) -> dict[str, tuple[int, int]]:
    """Per ``network.topology.m`` of a no-liar records sweep: (seeds where ``hit``, seeds)."""
    from ..io.records import read_records

    out: dict[str, list[int]] = {}
    for r in read_sweep(folder):
        if r.get("status") != "ok":
            continue
        states = read_records(folder / "runs" / r["point"] / f"seed-{r['seed']}", "states.jsonl")
        k = out.setdefault(r["network.topology.m"], [0, 0])
        k[0] += int(hit(states))
        k[1] += 1
    return {m: (a, b) for m, (a, b) in out.items()}


def coalition96_docs_figure(root: str | Path, frame_target: str = "A1", shield_target: str = "A3",
                            shield_from: int = 2017):
    """docs/img/adversarial-coalition-96.png: framing and shielding success against
    coalition size on the 96-agent sparse graphs of two degrees, without and with
    each defence. ``root`` holds the sweep folders ``frame-<d>``, ``frame0-<d>``
    (no liar, records), ``shield-<d>``, ``shield0-<d>`` for every defence ``d`` of
    :data:`DEFENCES_96` (docs/adversarial.md gives the commands)."""
    root = Path(root)
    fig = _new_figure(6.4)
    axes = [fig.add_subplot(2, 2, i + 1) for i in range(4)]
    panels = []
    for kind, col, label in (("frame", "events.0.count", f"Framing the healthy {frame_target}: isolated within 2,016 tasks"),
                             ("shield", "events.1.count", f"Shielding the degraded {shield_target}: never isolated while degraded")):
        for m, deg in (("228", "228 edges, mean degree 4.75"), ("456", "456 edges, mean degree 9.5")):
            curves = []
            for d, name, color, marker in DEFENCES_96:
                if not (root / f"{kind}-{d}" / "results.csv").exists():
                    continue
                rows = [r for r in read_sweep(root / f"{kind}-{d}") if r.get("network.topology.m") == m]
                if kind == "frame":
                    data = success_by_size(rows, col, lambda r: (_num(r.get("adversarial.framing.framed_isolated")) or 0) > 0)
                    base = _baseline_by_graph(root / f"frame0-{d}",
                                              lambda st: any(s["agent"] == frame_target and s["new"] == "isolated" for s in st))
                else:
                    data = success_by_size(rows, col, lambda r: (_num(r.get("adversarial.shielding.shielded_not_isolated")) or 0) > 0)
                    base = _baseline_by_graph(root / f"shield0-{d}",
                                              lambda st: not _isolated_during(st, shield_target, shield_from))
                if m in base:
                    data = {0: base[m], **data}
                curves.append({"label": name, "data": data, "color": color, "marker": marker})
            panels.append({"title": f"{label}\n96 agents, {deg}", "xlabel": "coalition size (the target's neighbours, drawn per seed)",
                           "curves": curves, "legend": "lower right" if kind == "frame" else "upper left"})
    return coalition_figure(panels, ax=axes)
