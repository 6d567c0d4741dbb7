"""MeshHeal figures: per-agent timelines (Fig. C1), the state heatmap, the detector view."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from ..core.errors import InputError, RunFolderError
from ..core.names import node_order
from .canvas import (
    BAND_COLOR, CURVE_COLOR, DEGRADED_COLOR, HEAT_COLORS, HEAT_COLUMNS, MAX_PANELS, STATE_COLORS, _axes,
    _new_figure, _rect)
from .folder import RunFolder, _agent_list, _as_folder, _need_meshheal
from .stats import (
    choose_agents, degraded_intervals, healing_marks, state_series, STATES, _reference_band, _rolling, _spans)


#: hatching of collapse spans (every healthy holder of an ability isolated at once; summary.json ``collapse``)
COLLAPSE_COLOR = "#5f3dc4"


def collapse_spans(rf: RunFolder) -> list[tuple[int, int, list[str]]]:
    """[start, end) task spans during which at least one ability had every healthy
    holder isolated, with the abilities collapsed in each; from summary.json
    (``collapse.spans``; empty for runs made before it existed)."""
    c = rf.summary.get("collapse")
    if not isinstance(c, dict):
        return []
    n = rf.n_tasks
    pts = sorted((int(d["start"]), int(d["end"]) if d.get("end") is not None else n + 1, str(d["ability"]))
                 for d in c.get("spans") or [])
    out: list[tuple[int, int, list[str]]] = []
    for a, b, name in pts:
        if out and a <= out[-1][1]:
            lo, hi, names = out[-1]
            out[-1] = (lo, max(hi, b), sorted(set(names) | {name}))
        else:
            out.append((a, b, [name]))
    return out


def _shade_collapse(ax, spans: list[tuple[int, int, list[str]]], label: bool = True) -> None:
    for i, (a, b, _names) in enumerate(spans):
        p = ax.axvspan(a - 0.5, b - 0.5, facecolor="none", edgecolor=COLLAPSE_COLOR, hatch="////", lw=0,
                       alpha=0.45, zorder=0.5, label="collapse" if (label and i == 0) else None)
        p.set_gid(f"collapse:{a}:{b}")


def _collapse_note(rf: RunFolder) -> Optional[str]:
    from ..observe.collapse import collapse_clause

    text = collapse_clause(rf.summary)
    return text.replace("COLLAPSE: ", "hatched: collapse, ") if text else None


#: link and topology events (scenario ``events``) marked on the timelines; degrade / recover are the pink spans
TOPOLOGY_EVENTS = ("link_down", "link_up", "set_link", "add_link", "remove_link", "add_agent", "remove_agent",
                   "partition", "heal")
EVENT_COLOR = "#e8590c"


def topology_events(rf: RunFolder) -> list[dict]:
    """The link and topology events that fired in the run, from ``events.jsonl``: per event its
    ``task`` (``at_task`` as the scenario gives it; a timed event: the task in progress at its
    time, from tasks.jsonl), ``event``, the ``agents`` it touches (none: every link, a partition)
    and a short ``label``. Empty when the folder has no events table."""
    import bisect

    if "_topo_events" in rf._cache:
        return rf._cache["_topo_events"]
    out: list[dict] = []
    if rf.has("events.jsonl"):
        declared = rf.scenario.get("events") or []
        starts: Optional[list[tuple[float, int]]] = None
        for r in rf.iter_jsonl("events.jsonl"):
            if r.get("type") != "event" or r.get("event") not in TOPOLOGY_EVENTS:
                continue
            i = r.get("index")
            spec = declared[i] if isinstance(i, int) and 0 <= i < len(declared) and \
                isinstance(declared[i], dict) else {}
            task = spec.get("at_task")
            if not isinstance(task, int):
                if starts is None:
                    starts = sorted((float(t.get("start") or 0.0), int(t["index"])) for t in rf.tasks()
                                    if isinstance(t.get("index"), int))
                j = bisect.bisect_right(starts, (float(r.get("t") or 0.0), float("inf"))) - 1
                task = starts[j][1] if j >= 0 else 1
            out.append(dict(task=task, **_event_words(r)))
    rf._cache["_topo_events"] = out
    return out


def _event_words(r: dict) -> dict:
    ev = str(r.get("event"))
    link = r.get("link")
    if isinstance(link, list) and len(link) == 2:
        agents = [str(a) for a in link]
        word = {"link_down": "down", "link_up": "up", "add_link": "added", "remove_link": "removed",
                "set_link": "changed"}.get(ev, ev)
        return {"event": ev, "agents": agents, "label": f"{agents[0]}–{agents[1]} {word}"}
    if ev in ("add_agent", "remove_agent"):
        a = str(r.get("agent"))
        return {"event": ev, "agents": [a], "label": f"{a} {'added' if ev == 'add_agent' else 'removed'}"}
    if ev == "set_link":
        return {"event": ev, "agents": [], "label": "links changed"}
    return {"event": ev, "agents": [], "label": ev}


def _mark_events(ax, rf: RunFolder, agent: Optional[str], label: bool = True) -> list[dict]:
    """Dotted orange lines at the link and topology events: solid and labelled for events that touch
    ``agent`` (its links, itself) or every agent (a partition, a change of every link)."""
    events = topology_events(rf)
    mine = [e for e in events if not e["agents"] or agent in e["agents"]]
    for k, e in enumerate(events):
        own = e in mine
        ln = ax.axvline(e["task"], color=EVENT_COLOR, ls="-" if own else ":", lw=1.1 if own else 0.8,
                        alpha=0.9 if own else 0.55, zorder=2)
        ln.set_gid(f"topology:{e['event']}:{e['task']}:{k}")
        if label and own and len(mine) <= 8:
            ax.annotate(e["label"], (e["task"], 0.11), xycoords=("data", "axes fraction"), xytext=(2, 0),
                        textcoords="offset points", rotation=90, va="bottom", ha="left", fontsize=7,
                        color=EVENT_COLOR, zorder=6, bbox={"fc": "white", "ec": "none", "alpha": 0.7, "pad": 0.3})
    return events


def _shade_degraded(ax, spans: list[tuple[int, int]], label: bool = True) -> None:
    for i, (b, r) in enumerate(spans):
        ax.axvspan(b - 0.5, r - 0.5, color=DEGRADED_COLOR, lw=0, zorder=0,
                   label="injected degradation" if (label and i == 0) else None)


def _state_strip(ax, series: Sequence[str], y0: float, h: float) -> None:
    for lo, hi, st in _spans(series, 1):
        ax.add_patch(_rect((lo - 0.5, y0), hi - lo, h, STATE_COLORS.get(st, "#adb5bd")))


_LABEL_BOX = {"fc": "white", "ec": "none", "alpha": 0.8, "pad": 0.6}


def _marks(ax, rf: RunFolder, agent: str, top: float) -> list[dict]:
    """Vertical lines at c (detection) and u (reintegration), delays written next to them."""
    drawn = []
    for i, m in enumerate(healing_marks(rf, agent)):
        for kind, letter, at, state in (("detection", "c", "isolated_at", "isolated"),
                                        ("reintegration", "u", "reintegrated_at", "normal")):
            t = m.get(at)
            if not isinstance(t, int):
                continue
            ln = ax.axvline(t, color=STATE_COLORS[state], ls="--", lw=1.3, zorder=4)
            ln.set_gid(f"{kind}:{agent}:{i}")
            ax.annotate(f"{letter}={t}\nδ={m.get(f'{kind}_delay')}", (t, top), xycoords=("data", "axes fraction"),
                        xytext=(3, -2), textcoords="offset points", va="top", ha="left", fontsize=8,
                        color=STATE_COLORS[state], zorder=6, bbox=_LABEL_BOX)
            drawn.append({"kind": kind, "task": t})
    return drawn


def _mark_caption(rf: RunFolder, agent: str) -> str:
    parts = []
    for m in healing_marks(rf, agent):
        b, r = m.get("degraded_at"), m.get("recovered_at")
        span = f"degraded {b}–{r - 1}" if isinstance(r, int) else f"degraded from {b}"
        if m.get("isolated_at") is None:
            parts.append(f"{span}: never isolated")
            continue
        p = f"{span}: detection delay {m['detection_delay']}, closure {'yes' if m.get('closure') else 'no'}"
        if isinstance(r, int):
            d = m.get("reintegration_delay")
            p += f", reintegration delay {d}" if d is not None else ", not reintegrated"
        parts.append(p)
    return "; ".join(parts) if parts else "never degraded"


def _state_legend_handles(probe: bool = True, curve: bool = True, band: bool = True, degraded: bool = True,
                          collapse: bool = False, events: bool = False):
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    h = [Line2D([], [], ls="", marker="o", color=STATE_COLORS[s], label=s) for s in STATES]
    if probe:
        h.append(Line2D([], [], ls="", marker="o", mfc="none", color="#495057", label="recovery probe"))
    if curve:
        h.append(Line2D([], [], color=CURVE_COLOR, lw=1.5, label="mean review score"))
    if band:
        h.append(Patch(color=BAND_COLOR, alpha=0.6, label="normal agents' range"))
    if degraded:
        h.append(Patch(color=DEGRADED_COLOR, label="injected degradation"))
    if collapse:
        h.append(Patch(facecolor="none", edgecolor=COLLAPSE_COLOR, hatch="////", lw=0,
                       label="collapse (all healthy holders isolated)"))
    if events:
        h.append(Line2D([], [], color=EVENT_COLOR, lw=1.1, label="link / topology event (dotted: other agents')"))
    return h


def agent_timeline(run: Any, agent: str, ax=None, seed: Optional[int] = None, window: Optional[int] = None,
                   legend: bool = True):
    """Fig. C1 for one agent: review scores, inferred state and self-healing marks.

    x = task index. Pink spans: injected degradation (ground truth). One
    marker per reviewed output of the agent (score q), coloured by the state
    inferred after that review's detector update; hollow markers are recovery
    probes. Black curve: the agent's rolling mean score over its last
    ``window`` reviews (default: the detector window); blue band: the 10th-90th
    percentile of the same curve over the agents that are normal at that task.
    Bottom strip: the inferred state. Dashed lines: c (detection) and u
    (reintegration), with their delays.
    """

    rf = _as_folder(run, seed)
    _need_meshheal(rf, "timeline")
    if agent not in rf.agents():
        raise InputError(f"unknown agent (this run has {_agent_list(rf)})",
                         field="--agents", value=agent)
    ax = _axes(ax, 3.2)
    n = rf.n_tasks
    w = int(window or rf.params.get("window") or 8)
    _shade_degraded(ax, degraded_intervals(rf).get(agent, []))
    collapsed = collapse_spans(rf)
    _shade_collapse(ax, collapsed)
    x, lo, hi = _reference_band(rf, agent, w)
    inside = (x >= 1) & (x <= n)
    ax.fill_between(x[inside], lo[inside], hi[inside], color=BAND_COLOR, alpha=0.6, lw=0, zorder=1,
                    label="normal agents' range")
    rows = sorted((r for r in rf.agent_reviews(agent) if r.get("q") is not None),
                  key=lambda r: r["task"])
    series = state_series(rf, agent)
    if rows:
        ks = [r["task"] for r in rows]
        qs = [float(r["q"]) for r in rows]
        ax.plot(ks, _rolling(qs, w), color=CURVE_COLOR, lw=1.4, zorder=3, drawstyle="steps-post",
                label="mean review score")
        for st in STATES:
            def after(r):
                det = r.get("detector") or []
                return det[-1].get("state") if det else series[min(r["task"], n + 1)]

            for probe in (False, True):
                sel = [r for r in rows if after(r) == st and bool(r.get("probe")) == probe]
                if not sel:
                    continue
                col = STATE_COLORS[st]
                ax.scatter([r["task"] for r in sel], [r["q"] for r in sel], s=22 if not probe else 30,
                           marker="o", facecolors="none" if probe else col, edgecolors=col,
                           linewidths=1.1, zorder=5 if probe else 4, alpha=1.0 if probe else 0.85)
    # state strip under the scores
    _state_strip(ax, series, -0.19, 0.09)
    ax.text(0.0, -0.145, "state ", transform=ax.get_yaxis_transform(), ha="right", va="center", fontsize=8)
    _marks(ax, rf, agent, top=0.995)
    events = _mark_events(ax, rf, agent)
    ax.set_xlim(0.5, n + 0.5)
    ax.set_ylim(-0.22, 1.12)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_ylabel("review score q")
    ax.set_title(f"{agent}: {_mark_caption(rf, agent)}", fontsize=9, loc="left")
    if legend and ax.figure is not None and len(ax.figure.axes) == 1:
        ax.figure.legend(handles=_state_legend_handles(collapse=bool(collapsed), events=bool(events)),
                         loc="outside lower center", ncol=5 if collapsed or events else 8, fontsize=8, frameon=False)
        ax.set_xlabel("task index")
    return ax


def timeline(run: Any, agents: Optional[Sequence[str]] = None, seed: Optional[int] = None, fig=None,
             window: Optional[int] = None, note: Optional[str] = None):
    """Fig. C1 for several agents, one panel each (shared task axis).

    ``agents`` defaults to the degraded agents (then falsely isolated ones).
    More than ``MAX_PANELS`` agents (or a large run with no choice) gives the
    :func:`state_heatmap` instead.
    """
    rf = _as_folder(run, seed)
    _need_meshheal(rf, "timeline")
    chosen, note = (list(agents), note) if agents else choose_agents(rf)
    if len(chosen) > MAX_PANELS:
        if fig is None:
            fig = _new_figure(heatmap_height(len(chosen)))
        ax = fig.add_subplot(1, 1, 1)
        state_heatmap(rf, agents=chosen, ax=ax)
        return fig
    k = len(chosen)
    if fig is None:
        fig = _new_figure(timeline_height(k))
    axes = fig.subplots(k, 1, sharex=True, squeeze=False)[:, 0]
    for ax, a in zip(axes, chosen):
        agent_timeline(rf, a, ax=ax, window=window, legend=False)
    axes[-1].set_xlabel("task index")
    collapsed = bool(collapse_spans(rf))
    events = bool(topology_events(rf))
    fig.legend(handles=_state_legend_handles(collapse=collapsed, events=events), loc="outside lower center",
               ncol=5 if collapsed or events else 8, fontsize=8, frameon=False)
    lines = [x for x in (note, _collapse_note(rf)) if x]
    fig.suptitle(f"{rf.scenario.get('name', '')} (seed {rf.seed}): detection and reintegration"
                 + "".join(f"\n{x}" for x in lines), fontsize=10)
    return fig


def timeline_height(k: int) -> float:
    return 0.9 + 2.5 * k


def heatmap_height(n: int) -> float:
    return min(7.0, 1.6 + 0.22 * n)


def state_heatmap(run: Any, agents: Optional[Sequence[str]] = None, ax=None, seed: Optional[int] = None):
    """Inferred state of every agent (rows) at every task (columns).

    Rows: degraded agents first (grouped by degradation interval), then the
    others, natural order within a group. Black outlines: injected
    degradation (ground truth); one outline per group of consecutive rows
    with the same interval, so 576-agent runs stay readable.
    """
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    rf = _as_folder(run, seed)
    _need_meshheal(rf, "heatmap")
    names = list(agents) if agents else rf.agents()
    known = set(rf.agents())
    bad = [a for a in names if a not in known]
    if bad:
        raise InputError(f"unknown agent (this run has {_agent_list(rf)})",
                         field="--agents", value=bad[0])
    deg = degraded_intervals(rf)
    rows = sorted(names, key=lambda a: (0 if a in deg else 1, tuple(deg.get(a, ())), node_order(a)))
    n = rf.n_tasks
    ax = _axes(ax, heatmap_height(len(rows)))
    code = {s: i for i, s in enumerate(STATES)}
    per: dict[str, list[dict]] = {}
    for s in rf.states():
        per.setdefault(s["agent"], []).append(s)
    # more tasks than pixels: show the worst state per bin, so one-task blips stay visible
    step = max(1, math.ceil(n / HEAT_COLUMNS))
    pad = (-n) % step
    # one agent's row at full resolution at a time, then binned: (agents x tasks) is never
    # held (5,760 agents x 483,840 tasks would be 2.8 GB; issue 22, `meshsim report` bounded)
    mat = np.zeros((len(rows), (n + pad) // step), dtype=np.int8)
    row = np.zeros(n, dtype=np.int8)
    for i, a in enumerate(rows):
        cur, k0 = 0, 1
        for s in per.get(a, ()):
            k = max(1, min(int(s["task"]), n + 1))
            row[k0 - 1:k - 1] = cur
            cur, k0 = code.get(s["new"], 0), k
        row[k0 - 1:] = cur
        mat[i] = np.pad(row, (0, pad), mode="edge").reshape(-1, step).max(axis=1) if step > 1 else row
    cmap = ListedColormap([HEAT_COLORS[s] for s in STATES])
    ax.imshow(mat, aspect="auto", interpolation="nearest", cmap=cmap, vmin=0, vmax=2,
              extent=(0.5, n + pad + 0.5 if step > 1 else n + 0.5, len(rows) - 0.5, -0.5))
    ax.set_xlim(0.5, n + 0.5)
    # outlines: merge consecutive rows with the same intervals
    i = 0
    while i < len(rows):
        spans = tuple(deg.get(rows[i], ()))
        j = i
        while j + 1 < len(rows) and tuple(deg.get(rows[j + 1], ())) == spans:
            j += 1
        for b, r in spans:
            ax.add_patch(_rect((b - 0.5, i - 0.5), r - b, j - i + 1, "black", fill=False, lw=1.0, zorder=3))
        i = j + 1
    if len(rows) <= 40:
        ax.set_yticks(range(len(rows)), rows, fontsize=7 if len(rows) > 20 else 8)
    else:
        step = max(1, len(rows) // 12)
        ticks = list(range(0, len(rows), step))
        ax.set_yticks(ticks, [rows[t] for t in ticks], fontsize=7)
    collapsed = collapse_spans(rf)
    _shade_collapse(ax, collapsed)
    n_deg = sum(1 for a in rows if a in deg)
    ax.set_ylabel(f"agents ({n_deg} degraded first)" if n_deg else "agents")
    ax.set_xlabel("task index")
    ax.set_title(f"{rf.scenario.get('name', '')} (seed {rf.seed}): inferred state of {len(rows)} agents"
                 + (f" (worst per {step} tasks)" if step > 1 else "") + "; outlined: injected degradation",
                 fontsize=9, loc="left")
    handles = [Patch(facecolor=HEAT_COLORS[s], edgecolor="#868e96", label=s) for s in STATES]
    handles.append(Patch(facecolor="none", edgecolor="black", label="degraded (truth)"))
    if collapsed:
        handles.append(Patch(facecolor="none", edgecolor=COLLAPSE_COLOR, hatch="////", lw=0,
                             label="collapse: every healthy\nholder of an ability\nisolated"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
    return ax


def _detector_points(rf: RunFolder, agent: str) -> tuple[str, list[tuple[int, str, float, str, bool]], dict]:
    """(statistic label, [(task, ability, value, state, probe)], thresholds)."""
    from ..protocols.meshheal.detector import ABSOLUTE, CUSUM, RELATIVE

    p = rf.params
    kind = str(p.get("detector", RELATIVE))
    rows = sorted(rf.agent_reviews(agent), key=lambda r: r["task"])
    pts = []
    if kind == ABSOLUTE:
        w = int(p.get("window", 8))
        hist: dict[tuple[str, str], list[float]] = {}
        for r in rows:
            for d in r.get("detector") or []:
                if r.get("q") is None:
                    continue
                h = hist.setdefault((r["type"], d["ability"]), [])
                h.append(float(r["q"]))
                del h[:-w]
                pts.append((r["task"], d["ability"], sum(h) / len(h), d["state"], bool(r.get("probe"))))
        th = {"watch": (f"abs_watch = {p.get('abs_watch', 0.6):g} (watch below)", float(p.get("abs_watch", 0.6))),
              "isolate": (f"abs_isolate = {p.get('abs_isolate', 0.5):g} (isolate below)",
                          float(p.get("abs_isolate", 0.5)))}
        return f"own mean score (last {w}, per task type and ability)", pts, th
    for r in rows:
        for d in r.get("detector") or []:
            if d.get("z") is not None:
                pts.append((r["task"], d["ability"], float(d["z"]), d["state"], bool(r.get("probe"))))
    if kind == CUSUM:
        h = float(p.get("cusum_h", 1.0))
        return "CUSUM of the score deficit", pts, {"watch": ("h (watch)", h), "isolate": ("2h (isolate)", 2 * h)}
    return ("z = (x̄ − m) / max(m − p25, floor)", pts,
            {"watch": (f"α = {p.get('alpha', 1.2):g} (watch)", float(p.get("alpha", 1.2))),
             "isolate": (f"β = {p.get('beta', 2.0):g} (isolate)", float(p.get("beta", 2.0)))})


def detector_view(run: Any, agent: str, ax=None, seed: Optional[int] = None, legend: bool = True):
    """The detector statistic of ``agent`` at each of its matched reviews.

    Relative detector (default): z per (task type, ability) update with the
    α (watch) and β (isolate) lines from ``protocol.params``; CUSUM: the
    statistic against h and 2h; absolute: the agent's own recent mean score
    against abs_watch / abs_isolate (recomputed from reviews.jsonl). Points
    are coloured by the state after the update, hollow for probes; pink spans
    are injected degradation, the bottom strip the inferred state.
    """
    rf = _as_folder(run, seed)
    _need_meshheal(rf, "detector view")
    if agent not in rf.agents():
        raise InputError(f"unknown agent (this run has {_agent_list(rf)})",
                         field="--agents", value=agent)
    from ..protocols.meshheal.detector import DETECTORS, RELATIVE

    kind = DETECTORS.get(str(rf.params.get("detector", RELATIVE)))
    if (kind is not None and kind.watches is None) or rf.params.get("review") is False:
        raise RunFolderError("this run has no detector (protocol.params.detector: none)", file=str(rf.path))
    label, pts, th = _detector_points(rf, agent)
    ax = _axes(ax, 3.4)
    n = rf.n_tasks
    _shade_degraded(ax, degraded_intervals(rf).get(agent, []))
    pts.sort(key=lambda p: p[0])
    ax.plot([p[0] for p in pts], [p[2] for p in pts], color="#adb5bd", lw=0.7, zorder=2)
    for probe in (False, True):
        ss = [p for p in pts if p[4] == probe]
        if ss:
            cols = [STATE_COLORS.get(p[3], "#495057") for p in ss]
            ax.scatter([p[0] for p in ss], [p[2] for p in ss], marker="o", s=20 if not probe else 26,
                       facecolors="none" if probe else cols, edgecolors=cols, linewidths=1.0, zorder=4)
    (wl, wv), (il, iv) = th["watch"], th["isolate"]
    # the two labels sit on the far sides of their lines, so close thresholds do not collide
    upper = "watch" if wv > iv else "isolate"
    for key, v, lab, col in (("watch", wv, wl, STATE_COLORS["watched"]), ("isolate", iv, il, STATE_COLORS["isolated"])):
        ax.axhline(v, color=col, ls=":", lw=1.4, zorder=3)
        above = key == upper
        ax.annotate(lab, (1.0, v), xycoords=("axes fraction", "data"), xytext=(-3, 2 if above else -2),
                    textcoords="offset points", ha="right", va="bottom" if above else "top", fontsize=7,
                    color=col, zorder=6,
                    bbox={"fc": "white", "ec": "none", "alpha": 0.75, "pad": 0.5})
    vals = [p[2] for p in pts] + [wv, iv, 0.0]
    ymin, ymax = min(vals), max(vals)
    pad = (ymax - ymin) * 0.08 or 0.5
    strip = (ymax - ymin + 2 * pad) * 0.1
    ax.set_ylim(ymin - pad - strip, ymax + pad * 2.6)
    y0 = ymin - pad - strip
    _state_strip(ax, state_series(rf, agent), y0 + strip * 0.1, strip * 0.75)
    _marks(ax, rf, agent, top=0.995)
    events = _mark_events(ax, rf, agent)
    ax.set_xlim(0.5, n + 0.5)
    ax.set_ylabel("detector statistic")
    ax.set_title(f"{agent}: {label}" + ("" if pts else " (no detector updates with a statistic)"),
                 fontsize=9, loc="left")
    if legend and len(ax.figure.axes) == 1:
        ax.set_xlabel("task index")
        ax.figure.legend(handles=_state_legend_handles(curve=False, band=False, events=bool(events)),
                         loc="outside lower center",
                         ncol=6, fontsize=8, frameon=False)
    return ax


def detector_figure(run: Any, agents: Optional[Sequence[str]] = None, seed: Optional[int] = None, fig=None,
                    note: Optional[str] = None):
    """:func:`detector_view` for several agents, one panel each."""
    rf = _as_folder(run, seed)
    _need_meshheal(rf, "detector view")
    chosen, note = (list(agents), note) if agents else choose_agents(rf)
    if len(chosen) > MAX_PANELS:
        note = f"showing {MAX_PANELS} of the {len(chosen)} agents asked for: the first {MAX_PANELS}"
        chosen = chosen[:MAX_PANELS]
    if fig is None:
        fig = _new_figure(0.9 + 2.8 * len(chosen))
    axes = fig.subplots(len(chosen), 1, sharex=True, squeeze=False)[:, 0]
    for ax, a in zip(axes, chosen):
        detector_view(rf, a, ax=ax)
    axes[-1].set_xlabel("task index")
    fig.legend(handles=_state_legend_handles(curve=False, band=False, events=bool(topology_events(rf))),
               loc="outside lower center", ncol=6,
               fontsize=8, frameon=False)
    fig.suptitle(f"{rf.scenario.get('name', '')} (seed {rf.seed}): detector statistic per review"
                 + (f"\n{note}" if note else ""), fontsize=10)
    return fig
