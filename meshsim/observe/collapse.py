"""Collapse made visible: when the peer-relative detector's reference is made of degraded agents.

MeshHeal's relative detector (Sec. 4.2.2, App. B.5) judges agent i against
the *normal* direct neighbours: the reference score q̄ is the mean μ of the
normal neighbours holding (T, s), and the normal range (median m, p25) is
pooled from their shortfall means x̄. When degraded agents are the majority
of that pool, "normal" means "degraded": a healthy agent's shortfall is
negative relative to the pool's, the degraded look typical, and the healthy
agents that still stand out are the ones pushed over β. Each isolation of a
healthy agent removes it from every neighbour's pool, so the degraded share
grows: the flip feeds itself until every healthy holder of an ability may be
isolated at once while the degraded ones stay normal ("collapse").

This module measures both, as an outside observer, from what the run
records: the controllers' state changes (``states.jsonl``), the injected
degradation intervals and the neighbour sets the observer noted at task
starts (``topology_rows`` of the execution layer). A state change recorded
at task k takes effect from task k, as for detection delay
(:func:`meshsim.observe.detection.self_healing`). Definitions: docs/outputs.md
(``collapse``) and docs/meshheal.md.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

from ..core.names import node_order

__all__ = ["collapse_summary", "collapse_clause", "clopper_pearson", "collapse_rate"]

NORMAL, ISOLATED = "normal", "isolated"


def collapse_summary(n_tasks: int, states: Sequence[Mapping[str, Any]],
                     intervals: Mapping[str, Sequence[tuple[int, int]]],
                     topology: Sequence[tuple[int, Mapping[str, Iterable[str]]]],
                     abilities: Mapping[str, Iterable[str]]) -> dict[str, Any]:
    """The ``collapse`` section of summary.json.

    ``states``: routing-state changes ``{"agent", "task", "new"}`` in record
    order (every agent starts normal); ``intervals``: per agent its injected
    degradation intervals [b, r) (r = N+1 if never recovered); ``topology``:
    ``(task, {agent: neighbours})`` from that task on, sorted by task (agents
    absent from a snapshot are not in the network then); ``abilities``: each
    agent's original abilities K_i.

    Per task k = 1..N and agent i, with P_i(k) its neighbours in state normal:
    i's peer set is *degraded-majority* when #{j ∈ P_i(k) degraded at k} >
    #{j ∈ P_i(k) healthy at k}. Per ability s, with H_s(k) the present
    holders of s healthy at k: s is *collapsed* at k when H_s(k) is non-empty
    and every member is isolated at k.
    """
    n = int(n_tasks)
    changes: dict[int, list[tuple[str, str, Any]]] = {}

    def at(k: int) -> list:
        return changes.setdefault(min(max(int(k), 1), n + 1), [])

    for k, adj in topology:
        at(k).append(("topology", "", adj))
    for a, spans in intervals.items():
        for b, r in spans:
            at(b).append(("degraded", a, True))
            if r <= n:
                at(r).append(("degraded", a, False))
    for s in states:
        at(s["task"]).append(("state", s["agent"], s["new"]))
    K = {a: frozenset(v) for a, v in abilities.items()}

    nbrs: dict[str, tuple[str, ...]] = {}
    state: dict[str, str] = {}
    deg: dict[str, bool] = {}
    cnt: dict[str, list[int]] = {}  # agent -> [degraded, healthy] among its normal neighbours
    hh: dict[str, int] = {}  # ability -> present holders healthy now
    hi: dict[str, int] = {}  # ... of which isolated

    def cat(j: str) -> Optional[int]:
        if j not in nbrs or state.get(j, NORMAL) != NORMAL:
            return None
        return 0 if deg.get(j, False) else 1

    def contribute(j: str, sign: int) -> None:
        if j not in nbrs:
            return
        c = cat(j)
        if c is not None:
            for i in nbrs[j]:
                if i in cnt:
                    cnt[i][c] += sign
        if not deg.get(j, False):
            iso = state.get(j, NORMAL) == ISOLATED
            for s in K.get(j, ()):
                hh[s] = hh.get(s, 0) + sign
                hi[s] = hi.get(s, 0) + sign * iso

    maj_open: dict[str, int] = {}  # agent -> task its current degraded-majority span started
    maj_tasks: dict[str, int] = {}
    maj_first: dict[str, int] = {}
    col_open: dict[str, int] = {}
    col_spans: list[dict[str, Any]] = []
    any_maj = [None, 0]  # [open since, tasks]
    any_col = [None, 0]

    def flag_maj(i: str, on: bool, k: int) -> None:
        if on and i not in maj_open:
            maj_open[i] = k
            maj_first.setdefault(i, k)
        elif not on and i in maj_open:
            maj_tasks[i] = maj_tasks.get(i, 0) + k - maj_open.pop(i)

    def flag_col(s: str, on: bool, k: int) -> None:
        if on and s not in col_open:
            col_open[s] = k
        elif not on and s in col_open:
            k0 = col_open.pop(s)
            col_spans.append({"ability": s, "start": k0, "end": k, "tasks": k - k0})

    def flag_any(acc: list, on: bool, k: int) -> None:
        if on and acc[0] is None:
            acc[0] = k
        elif not on and acc[0] is not None:
            acc[1] += k - acc[0]
            acc[0] = None

    for k in sorted(changes):
        if k > n:
            break
        evs = changes[k]
        topo = [e for e in evs if e[0] == "topology"]
        touched_agents: set[str] = set()
        touched_abilities: set[str] = set()
        if topo:
            nbrs = {a: tuple(v) for a, v in topo[-1][2].items()}
        others = [e for e in evs if e[0] != "topology"]
        moved = sorted({a for _kind, a, _v in others}, key=node_order)
        if topo:
            for kind, a, v in others:
                if kind == "degraded":
                    deg[a] = v
                else:
                    state[a] = v
            # a new neighbour graph: recount from scratch
            cnt = {a: [0, 0] for a in nbrs}
            hh, hi = {}, {}
            for j in nbrs:
                contribute(j, +1)
            touched_agents = set(nbrs) | set(maj_open)
            touched_abilities = set(hh) | set(col_open)
        else:
            for j in moved:
                contribute(j, -1)
            for kind, a, v in others:
                if kind == "degraded":
                    deg[a] = v
                else:
                    state[a] = v
            for j in moved:
                contribute(j, +1)
                touched_agents.update(nbrs.get(j, ()))
                touched_abilities.update(K.get(j, ()))
        for i in touched_agents:
            c = cnt.get(i)
            flag_maj(i, c is not None and c[0] > c[1], k)
        for s in touched_abilities:
            flag_col(s, hh.get(s, 0) > 0 and hi.get(s, 0) == hh.get(s, 0), k)
        flag_any(any_maj, bool(maj_open), k)
        flag_any(any_col, bool(col_open), k)
    end = n + 1
    for i in list(maj_open):
        flag_maj(i, False, end)
    for s in list(col_open):
        flag_col(s, False, end)
    flag_any(any_maj, False, end)
    flag_any(any_col, False, end)
    col_spans.sort(key=lambda d: (d["start"], d["ability"]))
    for d in col_spans:
        d["end"] = d["end"] if d["end"] <= n else None  # None: lasted to the end of the stream
    by_agent = [{"agent": a, "tasks": maj_tasks[a], "first_at": maj_first[a]}
                for a in sorted(maj_tasks, key=node_order) if maj_tasks[a] > 0]
    return {
        "occurred": bool(col_spans),
        "tasks": any_col[1],
        "first_at": col_spans[0]["start"] if col_spans else None,
        "abilities": len({d["ability"] for d in col_spans}),
        "longest": max((d["tasks"] for d in col_spans), default=0),
        "spans": col_spans,
        "degraded_majority_tasks": any_maj[1],
        "degraded_majority_agent_tasks": sum(maj_tasks.values()),
        "degraded_majority_max_agent": max(maj_tasks.values(), default=0),
        "degraded_majority_agents": len(by_agent),
        "degraded_majority_by_agent": by_agent,
    }


def collapse_clause(summary: Mapping[str, Any]) -> Optional[str]:
    """One short console clause when a run collapsed, else None."""
    c = summary.get("collapse")
    if not isinstance(c, dict) or not c.get("occurred"):
        return None
    spans = c.get("spans") or []
    names = sorted({d["ability"] for d in spans})
    what = names[0] if len(names) == 1 else f"{len(names)} abilities"
    return (f"COLLAPSE: every healthy holder of {what} isolated from task {c.get('first_at')}"
            f" ({c.get('tasks')} tasks)")


def clopper_pearson(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper–Pearson) ``conf`` interval of a binomial proportion, k of n.

    P(collapse) is small and a sample of seeds often has none: the Student-t
    interval of summary.csv's mean of ``collapse.occurred`` is then [0, 0];
    this one is [0, 1 − (α/2)^(1/n)] (about 3.7/n at 95 %)."""
    from scipy.stats import beta

    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n > 0 (got k={k}, n={n})")
    a = 1.0 - conf
    lo = 0.0 if k == 0 else float(beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def collapse_rate(occurred: Iterable[Any], conf: float = 0.95) -> dict[str, Any]:
    """P(collapse) over runs (``collapse.occurred`` of each summary; None left out):
    ``{"k", "n", "p", "lo", "hi"}`` with the Clopper–Pearson interval (None when n = 0)."""
    xs = [bool(x) for x in occurred if x is not None]
    k, n = sum(xs), len(xs)
    if not n:
        return {"k": 0, "n": 0, "p": None, "lo": None, "hi": None}
    lo, hi = clopper_pearson(k, n, conf)
    return {"k": k, "n": n, "p": k / n, "lo": lo, "hi": hi}
