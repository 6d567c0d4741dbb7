"""The run's initial graph, coloured by final inferred state or by role."""
from __future__ import annotations

from typing import Any, Optional

from ..core.errors import InputError, MeshsimError, RunFolderError
from ..core.names import node_order
from .canvas import ROLE_COLORS, STATE_COLORS, _new_figure, _short, _TOPO_COLORS
from .folder import RunFolder, _as_folder, _summary_agents
from .stats import degraded_intervals, STATES


def _graph(rf: RunFolder):
    from ..scenario.model import agent_abilities, build_graph, parse_scenario

    src = str(rf.path / "scenario.resolved.yaml")
    try:
        sc = parse_scenario(rf.scenario, source=src, base_dir=rf.path)
        G = build_graph(sc, rf.seed)
        try:
            abilities, _ = agent_abilities(sc, G)
        except InputError:
            abilities = {v: [] for v in G.nodes}
    except MeshsimError as exc:
        raise RunFolderError(f"cannot rebuild the topology: {exc}", file=src) from None
    return G, abilities


def _final_states(rf: RunFolder) -> dict[str, str]:
    out: dict[str, str] = {}
    if rf.has("states.jsonl"):
        for s in rf.states():
            out[s["agent"]] = s["new"]
    return out


def _roles(rf: RunFolder, abilities: dict[str, list[str]]) -> dict[str, str]:
    """Agent roles: summary ``roles``, else scenario ``agents.roles`` (SAC: default
    strong), else the ability set."""
    s = rf.summary
    for key in ("roles", "role"):
        if isinstance(s.get(key), dict):
            return {str(a): str(r) for a, r in s[key].items()}
    declared = (rf.scenario.get("agents") or {}).get("roles")
    if (isinstance(declared, dict) and declared) or rf.is_sac:
        declared = declared if isinstance(declared, dict) else {}
        return {a: str(declared.get(a, "strong")) for a in abilities}
    return {a: (", ".join(k) if k else "no ability") for a, k in abilities.items()}


def topology(run: Any, color_by: str = "state", seed: Optional[int] = None, fig=None):
    """The run's initial graph (rebuilt from scenario.resolved.yaml).

    ≤ 100 agents: spring layout, nodes coloured by final inferred state (or by
    role: summary ``roles`` if present, else the ability set), ground-truth
    degraded agents ringed in black. Larger graphs: degree histogram and
    agents per ability, split by final state. The title gives the
    r-robustness (SAC Def. 3.3) for graphs of ≤ 30 agents.
    """
    import numpy as np
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    rf = _as_folder(run, seed)
    G, abilities = _graph(rf)
    n, m = G.number_of_nodes(), G.number_of_edges()
    final = _final_states(rf)
    deg_truth = set(degraded_intervals(rf)) if (rf.has("reviews.jsonl") or _summary_agents(rf.summary)) else set()
    title = f"{rf.scenario.get('name', '')}: {n} agents, {m} links (initial graph)"
    if 2 <= n <= 30:
        try:
            from ..graphs.robustness import robustness

            title += f", {robustness(G, time_limit=5.0)}-robust"
        except (MeshsimError, ImportError):
            pass
    if color_by == "role" or (color_by == "state" and not final and not rf.has("states.jsonl")):
        groups = _roles(rf, abilities)
        color_by = "role"
    else:
        groups = {v: final.get(v, "normal") for v in G.nodes}
    if n <= 100:
        import networkx as nx

        if fig is None:
            fig = _new_figure(6.0)
        ax = fig.add_subplot(1, 1, 1)
        pos = nx.spring_layout(G, seed=0) if n > 1 else {v: np.zeros(2) for v in G.nodes}
        segs = [(pos[u], pos[v]) for u, v in G.edges]
        ax.add_collection(LineCollection(segs, colors="#ced4da", linewidths=0.8 if n > 30 else 1.2, zorder=1))
        order = list(G.nodes)
        if color_by == "role":
            kinds = list(dict.fromkeys(groups.get(v, "?") for v in sorted(order, key=node_order)))
            if len(kinds) > 20:  # keep the legend readable: the rarest roles share one grey
                count = {k: sum(1 for v in order if groups.get(v) == k) for k in kinds}
                keep = set(sorted(kinds, key=lambda k: -count[k])[:19])
                other = f"other ({len(kinds) - 19} roles)"
                groups = {v: (g if g in keep else other) for v, g in groups.items()}
                kinds = [k for k in kinds if k in keep] + [other]
            palette = _palette(kinds)
        else:
            kinds = [s for s in STATES if s in set(groups.values())]
            palette = STATE_COLORS
        xy = np.array([pos[v] for v in order])
        size = 420 if n <= 12 else (160 if n <= 40 else 60)
        ax.scatter(xy[:, 0], xy[:, 1], s=size, c=[palette.get(groups.get(v, "?"), "#adb5bd") for v in order],
                   edgecolors=["black" if v in deg_truth else "white" for v in order],
                   linewidths=[2.4 if v in deg_truth else 0.8 for v in order], zorder=2)
        if n <= 40:
            for v in order:
                ax.annotate(v, pos[v], ha="center", va="center", fontsize=8 if n <= 12 else 6, color="white"
                            if n <= 12 else "black", xytext=(0, 0 if n <= 12 else 7), textcoords="offset points",
                            zorder=3, fontweight="bold" if n <= 12 else "normal")
        handles = [Line2D([], [], ls="", marker="o", ms=8, color=palette[k], label=_short(k)) for k in kinds]
        if deg_truth:
            handles.append(Line2D([], [], ls="", marker="o", ms=8, mfc="white", mec="black", mew=2,
                                  label="degraded (truth)"))
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False,
                  title="final state" if color_by == "state" else "role", title_fontsize=8)
        ax.set_aspect("equal", adjustable="datalim")
        ax.autoscale_view()
        ax.margins(0.08)
        ax.set_axis_off()
        ax.set_title(title, fontsize=10)
        return fig
    # large graph: degree and ability summary
    if fig is None:
        fig = _new_figure(3.8)
    a1, a2 = fig.subplots(1, 2)
    kinds = [s for s in STATES if s in set(groups.values())] if color_by == "state" else \
        list(dict.fromkeys(groups.values()))
    palette = STATE_COLORS if color_by == "state" else _palette(kinds)
    degs = dict(G.degree())
    dmax = max(degs.values()) if degs else 0
    dmin = min(degs.values()) if degs else 0
    bins = np.arange(dmin - 0.5, dmax + 1.5, max(1, (dmax - dmin + 1) // 40))
    a1.hist([[degs[v] for v in G.nodes if groups.get(v) == k] for k in kinds], bins=bins, stacked=True,
            color=[palette[k] for k in kinds], label=[_short(k) for k in kinds])
    a1.set_xlabel("degree")
    a1.set_ylabel("agents")
    a1.set_title(f"degree: min {min(degs.values())}, mean {np.mean(list(degs.values())):.1f}, max {dmax}",
                 fontsize=9)
    a1.legend(fontsize=8, frameon=False)
    abil = sorted({k for ks in abilities.values() for k in ks})
    if abil:
        bottom = np.zeros(len(abil))
        for k in kinds:
            cnt = np.array([sum(1 for v in G.nodes if ab in abilities.get(v, ()) and groups.get(v) == k)
                            for ab in abil], dtype=float)
            a2.barh(range(len(abil)), cnt, left=bottom, color=palette[k], label=_short(k))
            bottom += cnt
        a2.set_yticks(range(len(abil)), [a.replace("_", " ") for a in abil], fontsize=8)
        a2.invert_yaxis()
        a2.set_xlabel("holders")
        a2.set_title("agents per ability", fontsize=9)
    else:
        counts = [sum(1 for v in G.nodes if groups.get(v) == k) for k in kinds]
        a2.bar(range(len(kinds)), counts, color=[palette[k] for k in kinds])
        a2.set_xticks(range(len(kinds)), [_short(k) for k in kinds], fontsize=8)
        a2.set_ylabel("agents")
        a2.set_title("agents per " + ("final state" if color_by == "state" else "role"), fontsize=9)
    fig.suptitle(title, fontsize=10)
    return fig


def _palette(kinds: list[str]) -> dict[str, str]:
    """Role colours: fixed ones for SAC roles, then a qualitative palette."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    if len(kinds) <= len(_TOPO_COLORS):
        base = list(_TOPO_COLORS)
    else:
        base = [to_hex(colormaps["tab20"](i)) for i in range(20)]
    out = {}
    for i, k in enumerate(kinds):
        out[k] = "#adb5bd" if k.startswith("other (") else ROLE_COLORS.get(k, base[i % len(base)])
    return out
