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

from typing import Any, Generic, Hashable, Iterable, Mapping, Optional, Sequence, TypeVar

from ..core.names import node_order

__all__ = ["collapse_summary", "collapse_clause", "clopper_pearson", "collapse_rate", "Spans"]

NORMAL, ISOLATED = "normal", "isolated"

K = TypeVar("K", bound=Hashable)


class Spans(Generic[K]):
    """Half-open task spans [start, end) during which a condition holds, per key.

    ``set(key, on, k)`` says whether the condition holds for ``key`` from task
    k on; a span opens at the first k it holds and closes at the first k it no
    longer does. Every span the collapse summary counts (per agent, per
    ability, and "any of them" under one key) is one of these."""

    def __init__(self) -> None:
        self.open: dict[K, int] = {}  # key -> task its current span started
        self.first: dict[K, int] = {}  # key -> start of its first span
        self.tasks: dict[K, int] = {}  # key -> tasks in its closed spans
        self.closed: list[tuple[K, int, int]] = []  # (key, start, end) in closing order

    def set(self, key: K, on: bool, k: int) -> None:
        if on and key not in self.open:
            self.open[key] = k
            self.first.setdefault(key, k)
        elif not on and key in self.open:
            k0 = self.open.pop(key)
            self.tasks[key] = self.tasks.get(key, 0) + k - k0
            self.closed.append((key, k0, k))

    def close_all(self, k: int) -> None:
        for key in list(self.open):
            self.set(key, False, k)

    def total(self) -> int:
        """Tasks in every closed span of every key."""
        return sum(self.tasks.values())


class _Collapse:
    """The observer's running view, task by task: neighbour sets, routing
    states and degradation, with the counts that decide degraded-majority peer
    sets (per agent) and collapsed abilities (per ability)."""

    def __init__(self, abilities: Mapping[str, Iterable[str]]) -> None:
        self.K = {a: frozenset(v) for a, v in abilities.items()}
        self.nbrs: dict[str, tuple[str, ...]] = {}
        self.state: dict[str, str] = {}
        self.deg: dict[str, bool] = {}
        self.cnt: dict[str, list[int]] = {}  # agent -> [degraded, healthy] among its normal neighbours
        self.hh: dict[str, int] = {}  # ability -> present holders healthy now
        self.hi: dict[str, int] = {}  # ... of which isolated
        self.maj: Spans[str] = Spans()  # per agent: its normal peers are degraded-majority
        self.col: Spans[str] = Spans()  # per ability: every healthy present holder isolated
        self.any_maj: Spans[None] = Spans()  # key None: some agent's peer set is degraded-majority
        self.any_col: Spans[None] = Spans()  # key None: some ability collapsed

    def _cat(self, j: str) -> Optional[int]:
        if j not in self.nbrs or self.state.get(j, NORMAL) != NORMAL:
            return None
        return 0 if self.deg.get(j, False) else 1

    def _contribute(self, j: str, sign: int) -> None:
        if j not in self.nbrs:
            return
        c = self._cat(j)
        if c is not None:
            for i in self.nbrs[j]:
                if i in self.cnt:
                    self.cnt[i][c] += sign
        if not self.deg.get(j, False):
            iso = self.state.get(j, NORMAL) == ISOLATED
            for s in self.K.get(j, ()):
                self.hh[s] = self.hh.get(s, 0) + sign
                self.hi[s] = self.hi.get(s, 0) + sign * iso

    def _apply(self, others: Sequence[tuple[str, str, Any]]) -> None:
        for kind, a, v in others:
            if kind == "degraded":
                self.deg[a] = v
            else:
                self.state[a] = v

    def step(self, k: int, evs: Sequence[tuple[str, str, Any]]) -> None:
        """Apply the changes taking effect at task k and update every span."""
        topo = [e for e in evs if e[0] == "topology"]
        touched_agents: set[str] = set()
        touched_abilities: set[str] = set()
        others = [e for e in evs if e[0] != "topology"]
        if topo:
            self.nbrs = {a: tuple(v) for a, v in topo[-1][2].items()}
            self._apply(others)
            # a new neighbour graph: recount from scratch
            self.cnt = {a: [0, 0] for a in self.nbrs}
            self.hh, self.hi = {}, {}
            for j in self.nbrs:
                self._contribute(j, +1)
            touched_agents = set(self.nbrs) | set(self.maj.open)
            touched_abilities = set(self.hh) | set(self.col.open)
        else:
            moved = sorted({a for _kind, a, _v in others}, key=node_order)
            for j in moved:
                self._contribute(j, -1)
            self._apply(others)
            for j in moved:
                self._contribute(j, +1)
                touched_agents.update(self.nbrs.get(j, ()))
                touched_abilities.update(self.K.get(j, ()))
        for i in touched_agents:
            c = self.cnt.get(i)
            self.maj.set(i, c is not None and c[0] > c[1], k)
        for s in touched_abilities:
            self.col.set(s, self.hh.get(s, 0) > 0 and self.hi.get(s, 0) == self.hh.get(s, 0), k)
        self.any_maj.set(None, bool(self.maj.open), k)
        self.any_col.set(None, bool(self.col.open), k)

    def summary(self, n: int) -> dict[str, Any]:
        """Close every span at the end of the stream (task n + 1) and report."""
        for spans in (self.maj, self.col, self.any_maj, self.any_col):
            spans.close_all(n + 1)
        col_spans: list[dict[str, Any]] = [
            {"ability": s, "start": k0, "end": k1 if k1 <= n else None,  # None: lasted to the end
             "tasks": k1 - k0}
            for s, k0, k1 in sorted(self.col.closed, key=lambda t: (t[1], t[0]))]
        maj_tasks = self.maj.tasks
        by_agent = [{"agent": a, "tasks": maj_tasks[a], "first_at": self.maj.first[a]}
                    for a in sorted(maj_tasks, key=node_order) if maj_tasks[a] > 0]
        return {
            "occurred": bool(col_spans),
            "tasks": self.any_col.total(),
            "first_at": col_spans[0]["start"] if col_spans else None,
            "abilities": len({d["ability"] for d in col_spans}),
            "longest": max((d["tasks"] for d in col_spans), default=0),
            "spans": col_spans,
            "degraded_majority_tasks": self.any_maj.total(),
            "degraded_majority_agent_tasks": self.maj.total(),
            "degraded_majority_max_agent": max(maj_tasks.values(), default=0),
            "degraded_majority_agents": len(by_agent),
            "degraded_majority_by_agent": by_agent,
        }


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

    def at(k: int) -> list[tuple[str, str, Any]]:
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
    view = _Collapse(abilities)
    for k in sorted(changes):
        if k > n:
            break
        view.step(k, changes[k])
    return view.summary(n)


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
