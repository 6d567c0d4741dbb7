"""Sparse graphs that keep every ability reviewable (MeshHeal App. B.7, Tab. B12).

Given ``abilities`` (agent -> ability names) and a set of degraded ``targets``,
:func:`ability_sparse_graph` builds a seeded sparse graph in which

(a) every agent has, for each ability it holds, >= 1 non-target neighbour
    holding that ability;
(b) every target has, for each ability it holds, >= 2 non-target neighbours
    holding it;
(c) every agent is within ``max_distance`` hops of a non-target holder of
    every ability in the vocabulary;
(d) the graph is connected;
(e) it has exactly ``m`` edges (Tab. B12: 228 / 705 / 1454 edges for 96 / 288
    / 576 agents, see :func:`default_edges`).

Construction: (1) greedily pair each agent with healthy same-ability holders,
preferring agents in the same or adjacent replicas of the profile (ties broken
at random) and then drop edges that turned out redundant; (2) join the
components with a random tree of edges; (3) add edges until the ability
distance is within ``max_distance``; (4) add uniformly random edges up to
``m``. Everything is drawn from ``random.Random(seed)``, so the same inputs and
seed always give the same graph. The checks of (a)-(d) are
:mod:`meshsim.graphs.ability_checks` (re-exported here).

Importing the module registers the topology kind ``ability_sparse``
(``n``, optional ``m``, ``abilities``, ``targets``, ``max_distance``).
"""
from __future__ import annotations

import random
from collections import deque
from typing import Any, Iterable, Mapping

import networkx as nx

from ..core.errors import TopologyError
from ..core.names import agent_name, node_order
from .ability_checks import ability_distance, check_ability_graph
from .registry import register_generator

__all__ = [
    "ability_sparse_graph",
    "check_ability_graph",
    "ability_distance",
    "default_edges",
    "default_profile",
    "replicate_profile",
    "DEFAULT_PROFILE",
    "DEFAULT_TARGETS",
]

# The built-in six-agent profile (placeholder until the paper's profiles are wired in).
DEFAULT_PROFILE: dict[str, list[str]] = {
    "A1": ["ab1", "ab4", "ab6"],
    "A2": ["ab2", "ab3", "ab6", "ab7"],
    "A3": ["ab1", "ab3", "ab5"],
    "A4": ["ab1", "ab4", "ab5"],
    "A5": ["ab2", "ab4", "ab6", "ab7"],
    "A6": ["ab2", "ab3", "ab5", "ab7"],
}
DEFAULT_TARGETS: frozenset[str] = frozenset({"A3", "A5"})

# Tab. B12: agents -> edges.
_TABLE_EDGES = {96: 228, 288: 705, 576: 1454}

_ATTEMPTS = 8  # extra constructions tried when the first one needs more than m edges


# --------------------------------------------------------------------------
# small public helpers


def default_edges(n: int) -> int:
    """Edge count of Tab. B12 for ``n`` agents (228 / 705 / 1454 for 96 / 288 / 576).

    Between the table's points the count is interpolated linearly; outside
    them the nearest end's edges-per-agent ratio (about 2.4 below 96, about
    2.5 above 576) is used. Never more than ``n(n-1)/2``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise TopologyError("number of agents must be a non-negative integer", field="network.topology.n",
                            value=n)
    if n in _TABLE_EDGES:
        return _TABLE_EDGES[n]
    pts = sorted(_TABLE_EDGES.items())
    if n < pts[0][0]:
        est = n * pts[0][1] / pts[0][0]
    elif n > pts[-1][0]:
        est = n * pts[-1][1] / pts[-1][0]
    else:
        for (n0, m0), (n1, m1) in zip(pts, pts[1:]):
            if n0 <= n <= n1:
                est = m0 + (m1 - m0) * (n - n0) / (n1 - n0)
                break
    return min(int(round(est)), n * (n - 1) // 2)


def replicate_profile(profile: Mapping[str, Iterable[str]], targets: Iterable[str],
                      n: int) -> tuple[dict[str, list[str]], set[str]]:
    """Copy a ``p``-agent profile ``n / p`` times: ``A{p*r + j}`` copies ``A{j}``.

    Profile agents must be named ``A1``..``Ap``; returns the full ability map and
    the replicated target set.
    """
    p = len(profile)
    names = [agent_name(j) for j in range(p)]
    if sorted(profile, key=node_order) != names:
        raise TopologyError(f"a profile's agents must be named A1..A{p}", field="network.topology.abilities",
                            value=sorted(profile, key=node_order))
    if p == 0 or n % p:
        raise TopologyError(f"number of agents must be a multiple of the profile size {p}",
                            field="network.topology.n", value=n)
    targets = set(targets)
    bad = sorted(targets - set(names), key=node_order)
    if bad:
        raise TopologyError("targets must be profile agents", field="network.topology.targets", value=bad)
    abil: dict[str, list[str]] = {}
    tset: set[str] = set()
    for r in range(n // p):
        for j, name in enumerate(names):
            copy = agent_name(r * p + j)
            abil[copy] = list(profile[name])
            if name in targets:
                tset.add(copy)
    return abil, tset


def default_profile(n: int) -> tuple[dict[str, list[str]], set[str]]:
    """The built-in profile replicated to ``n`` agents (``n`` a multiple of 6)."""
    return replicate_profile(DEFAULT_PROFILE, DEFAULT_TARGETS, n)


# --------------------------------------------------------------------------
# construction


class _Builder:
    """One randomized construction on integer nodes 0..n-1 (natural order)."""

    def __init__(self, K: list[frozenset[str]], T: list[bool], holders: dict[str, list[int]],
                 need: list[dict[str, int]], period: int, max_distance: int, rng: random.Random):
        self.n = len(K)
        self.K, self.T, self.holders, self.need = K, T, holders, need
        self.period = period
        self.R = self.n // period
        self.max_distance = max_distance
        self.rng = rng
        self.adj: list[set[int]] = [set() for _ in range(self.n)]
        self.m = 0
        # cnt[u][s]: non-target neighbours of u holding s (only for s in K[u])
        self.cnt: list[dict[str, int]] = [{s: 0 for s in K[u]} for u in range(self.n)]

    # -- edges ----------------------------------------------------------
    def add(self, u: int, v: int) -> None:
        self.adj[u].add(v)
        self.adj[v].add(u)
        self.m += 1
        self._count(u, v, +1)

    def remove(self, u: int, v: int) -> None:
        self.adj[u].discard(v)
        self.adj[v].discard(u)
        self.m -= 1
        self._count(u, v, -1)

    def _count(self, u: int, v: int, delta: int) -> None:
        common = self.K[u] & self.K[v]
        if not common:
            return
        for s in common:
            if not self.T[v]:
                self.cnt[u][s] += delta
            if not self.T[u]:
                self.cnt[v][s] += delta

    def unmet(self, u: int) -> dict[str, int]:
        c = self.cnt[u]
        return {s: k - c[s] for s, k in self.need[u].items() if c[s] < k}

    def replica(self, u: int) -> int:
        return u // self.period

    def near(self, u: int, window: int) -> list[int]:
        """Agents in replicas within ``window`` of u's (circularly), in index order."""
        if self.R <= 2 * window + 1:
            return list(range(self.n))
        r = self.replica(u)
        reps = sorted({(r + d) % self.R for d in range(-window, window + 1)})
        p = self.period
        return [x for rr in reps for x in range(rr * p, rr * p + p)]

    # -- phase 1: coverage (a), (b) ----------------------------------------
    def cover(self) -> None:
        order_t = [u for u in range(self.n) if self.T[u] and self.need[u]]
        order_h = [u for u in range(self.n) if not self.T[u] and self.need[u]]
        self.rng.shuffle(order_t)
        self.rng.shuffle(order_h)
        for u in order_t + order_h:
            while True:
                miss = self.unmet(u)
                if not miss:
                    break
                v = self._best_partner(u, miss)
                self.add(u, v)
        self._prune()

    def _best_partner(self, u: int, miss: dict[str, int]) -> int:
        for pool in (self.near(u, 1), None):
            if pool is None:
                cands: set[int] = set()
                for s in miss:
                    cands.update(self.holders[s])
                pool = sorted(cands)
            best: list[int] = []
            best_gain = 0
            for v in pool:
                if v == u or self.T[v] or v in self.adj[u]:
                    continue
                gain = sum(1 for s in miss if s in self.K[v])
                if gain == 0:
                    continue
                if not self.T[u]:
                    cv, nv = self.cnt[v], self.need[v]
                    gain += sum(1 for s in self.K[u] & self.K[v] if cv[s] < nv[s])
                if gain > best_gain:
                    best_gain, best = gain, [v]
                elif gain == best_gain:
                    best.append(v)
            if best:
                return self.rng.choice(best)
        raise TopologyError(f"agent {agent_name(u)} cannot get enough non-target neighbours for "
                            f"{sorted(miss)}")  # excluded by the feasibility check

    def _prune(self) -> None:
        edges = sorted((u, v) for u in range(self.n) for v in self.adj[u] if u < v)
        self.rng.shuffle(edges)
        for u, v in edges:
            ok = True
            for s in self.K[u] & self.K[v]:
                if not self.T[v] and self.cnt[u][s] - 1 < self.need[u].get(s, 0):
                    ok = False
                    break
                if not self.T[u] and self.cnt[v][s] - 1 < self.need[v].get(s, 0):
                    ok = False
                    break
            if ok:
                self.remove(u, v)

    # -- phase 2: connectivity (d) -------------------------------------------
    def components(self) -> list[list[int]]:
        seen = [False] * self.n
        comps = []
        for s in range(self.n):
            if seen[s]:
                continue
            seen[s] = True
            comp, stack = [s], [s]
            while stack:
                x = stack.pop()
                for y in self.adj[x]:
                    if not seen[y]:
                        seen[y] = True
                        comp.append(y)
                        stack.append(y)
            comps.append(sorted(comp))
        return comps

    def connect(self) -> None:
        comps = self.components()
        if len(comps) <= 1:
            return
        self.rng.shuffle(comps)
        for i in range(1, len(comps)):
            other = comps[self.rng.randrange(i)]
            # prefer healthy endpoints: they also shorten ability distances
            a = self._pick_endpoint(comps[i])
            b = self._pick_endpoint(other)
            self.add(a, b)

    def _pick_endpoint(self, comp: list[int]) -> int:
        healthy = [x for x in comp if not self.T[x]]
        return self.rng.choice(healthy or comp)

    # -- phase 3: ability distance (c) ---------------------------------------
    def far_pairs(self) -> dict[int, list[str]]:
        far: dict[int, list[str]] = {}
        for s in sorted(self.holders):
            dist = [-1] * self.n
            q = deque(self.holders[s])
            for h in q:
                dist[h] = 0
            while q:
                x = q.popleft()
                if dist[x] >= self.max_distance:
                    continue
                for y in self.adj[x]:
                    if dist[y] < 0:
                        dist[y] = dist[x] + 1
                        q.append(y)
            for v in range(self.n):
                if dist[v] < 0:
                    far.setdefault(v, []).append(s)
        return far

    def shorten(self) -> None:
        while True:
            far = self.far_pairs()
            if not far:
                return
            worst = max(len(x) for x in far.values())
            v = self.rng.choice(sorted(u for u, x in far.items() if len(x) == worst))
            missing = set(far[v])
            near = set(self.near(v, 1))
            best: list[int] = []
            best_key = (0, 0)
            for h in range(self.n):
                if h == v or self.T[h] or h in self.adj[v]:
                    continue
                gain = len(missing & self.K[h])
                if gain == 0:
                    continue
                key = (gain, 1 if h in near else 0)
                if key > best_key:
                    best_key, best = key, [h]
                elif key == best_key:
                    best.append(h)
            if not best:  # cannot happen: every ability has a healthy holder
                raise TopologyError(f"agent {agent_name(v)} cannot reach holders of {sorted(missing)}")
            self.add(v, self.rng.choice(best))

    # -- phase 4: random edges up to m ----------------------------------------
    def fill(self, m: int) -> None:
        n = self.n
        need = m - self.m
        if need <= 0:
            return
        free = n * (n - 1) // 2 - self.m
        if need * 2 > free:
            pairs = [(u, v) for u in range(n) for v in range(u + 1, n) if v not in self.adj[u]]
            for u, v in self.rng.sample(pairs, need):
                self.add(u, v)
            return
        while self.m < m:
            u = self.rng.randrange(n)
            v = self.rng.randrange(n)
            if u != v and v not in self.adj[u]:
                self.add(u, v)

    def build_minimal(self) -> None:
        self.cover()
        self.connect()
        self.shorten()

    def edges(self) -> list[tuple[int, int]]:
        return sorted((u, v) for u in range(self.n) for v in self.adj[u] if u < v)


def _period(K: list[frozenset[str]], T: list[bool]) -> int:
    """Smallest p dividing n such that agent i is a copy of agent i mod p."""
    n = len(K)
    for p in range(1, n + 1):
        if n % p:
            continue
        if all(K[i] == K[i % p] and T[i] == T[i % p] for i in range(p, n)):
            return p
    return max(n, 1)


def ability_sparse_graph(abilities: Mapping[str, Iterable[str]], targets: Iterable[str],
                         m: int | None = None, seed: int = 0, max_distance: int = 3) -> nx.Graph:
    """A sparse connected graph on ``abilities``' agents satisfying conditions (a)-(c).

    ``targets`` are the degraded agents (they never count as reviewers).
    With ``m`` the result has exactly ``m`` edges; if the construction needs
    more (best of a few seeded tries), :class:`TopologyError` names the
    minimum it found (also as the error's ``min_edges`` attribute). With ``m=None`` the target is :func:`default_edges`,
    or the minimum found if that is larger. Nodes are the agents in natural
    order (``A2`` before ``A10``); ``G.graph["min_edges"]`` records the
    edge count before the random fill.
    """
    if isinstance(max_distance, bool) or not isinstance(max_distance, int) or max_distance < 1:
        raise TopologyError("must be an integer >= 1", field="network.topology.max_distance", value=max_distance)
    targets = set(targets)
    names = sorted(set(abilities) | targets, key=node_order)
    n = len(names)
    unknown = sorted(targets - set(abilities), key=node_order)
    if unknown:
        raise TopologyError("targets must be agents of the ability map", field="network.topology.targets",
                            value=unknown)
    max_m = n * (n - 1) // 2
    if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 0 or m > max_m):
        raise TopologyError(f"must be an integer in [0, {max_m}]", field="network.topology.m", value=m)

    K = [frozenset(abilities.get(v, ())) for v in names]
    T = [v in targets for v in names]
    vocab = sorted({s for ks in K for s in ks})
    holders = {s: [i for i in range(n) if s in K[i] and not T[i]] for s in vocab}
    need = [{s: (2 if T[i] else 1) for s in K[i]} for i in range(n)]

    # feasibility of (a)-(c) at all
    no_holder = [s for s in vocab if not holders[s]]
    if no_holder:
        raise TopologyError("every ability needs a non-target holder", field="network.topology.targets",
                            value=no_holder)
    for i in range(n):
        for s, k in need[i].items():
            avail = len(holders[s]) - (0 if T[i] else 1)
            if avail < k:
                raise TopologyError(f"agent {names[i]} needs {k} non-target neighbour(s) holding '{s}' "
                                    f"but only {avail} exist", field="network.topology.abilities", value=s)

    rng = random.Random(seed)
    period = _period(K, T)
    best: _Builder | None = None
    target = m if m is not None else default_edges(n)
    for attempt in range(1 + _ATTEMPTS):
        b = _Builder(K, T, holders, need, period, max_distance, random.Random(rng.getrandbits(64)))
        b.build_minimal()
        if best is None or b.m < best.m:
            best = b
        if best.m <= target:
            break
    assert best is not None
    min_edges = best.m
    if best.m > target:
        if m is not None:
            err = TopologyError(f"m={m} is too few edges: the smallest graph found that meets the ability "
                                f"conditions has {min_edges} edges", field="network.topology.m", value=m)
            err.min_edges = min_edges  # type: ignore[attr-defined]
            raise err
        target = best.m
    best.fill(target)

    G = nx.Graph(min_edges=min_edges)
    G.add_nodes_from(names)
    G.add_edges_from((names[u], names[v]) for u, v in best.edges())
    return G


# --------------------------------------------------------------------------
# topology kind "ability_sparse"


def _int_param(params: dict, key: str, default: Any = None, low: int | None = None) -> Any:
    if key not in params or params[key] is None:
        if default is None and key == "n":
            raise TopologyError("topology 'ability_sparse' needs 'n'", field="network.topology.n")
        return default
    val = params[key]
    if isinstance(val, bool) or not isinstance(val, int):
        raise TopologyError("must be an integer", field=f"network.topology.{key}", value=val)
    if low is not None and val < low:
        raise TopologyError(f"must be >= {low}", field=f"network.topology.{key}", value=val)
    return val


def _generator(params: dict, seed: int) -> nx.Graph:
    """``ability_sparse``: ``n`` agents; optional ``m``, ``abilities``, ``targets``, ``max_distance``.

    ``abilities`` may map all ``n`` agents or a profile (``A1``..``Ap``, ``p``
    dividing ``n``) that is replicated; ``targets`` names degraded agents of
    the same map. Without ``abilities`` the built-in six-agent profile is used
    (targets: copies of A3 and A5). Unknown keys (e.g. ``profile``) are ignored.
    """
    n = _int_param(params, "n", low=1)
    m = _int_param(params, "m", None, low=0)
    max_distance = _int_param(params, "max_distance", 3, low=1)
    abil = params.get("abilities")
    tlist = params.get("targets")
    if abil is None:
        if tlist is not None:
            raise TopologyError("'targets' needs 'abilities'", field="network.topology.targets", value=tlist)
        abilities, targets = default_profile(n)
    else:
        if not isinstance(abil, Mapping) or not all(
                isinstance(k, str) and isinstance(v, (list, tuple)) and all(isinstance(s, str) for s in v)
                for k, v in abil.items()):
            raise TopologyError("must map agent names to lists of ability names",
                                field="network.topology.abilities", value=abil)
        if tlist is None:
            tlist = []
        if not isinstance(tlist, (list, tuple, set, frozenset)) or not all(isinstance(t, str) for t in tlist):
            raise TopologyError("must be a list of agent names", field="network.topology.targets", value=tlist)
        if len(abil) == n:
            abilities, targets = {k: list(v) for k, v in abil.items()}, set(tlist)
        else:
            abilities, targets = replicate_profile(abil, tlist, n)
    return ability_sparse_graph(abilities, targets, m=m, seed=seed, max_distance=max_distance)


register_generator("ability_sparse", _generator)
