"""r-robustness of undirected agent graphs, and the F-local Byzantine model.

Definitions (LeBlanc et al. 2013, "Resilient asymptotic consensus in robust
networks"; SAC paper Def. 3.3):

* ``reach(S)`` of a nonempty node set ``S`` is the largest number of neighbours
  outside ``S`` that a single node of ``S`` has.  ``S`` is *r-reachable* iff
  ``reach(S) >= r``.
* ``G`` is *r-robust* iff for every pair of nonempty, disjoint ``S1, S2`` at
  least one of them is r-reachable, i.e. iff
  ``min_{S1, S2} max(reach(S1), reach(S2)) >= r``.

That min-max is what :func:`min_reach` computes, so the robustness of ``G``
(the largest r for which it is r-robust) equals ``min_reach(G)``.

Conventions, so every function is total and the cheap bounds stay true:

* a graph with fewer than 2 nodes has robustness 0 (there are no disjoint
  pairs, so it would be vacuously r-robust for all r; we instead follow
  "r-robust implies min degree >= r", which gives 0 for a single node);
* a disconnected graph has robustness 0 (one component vs. the rest);
* self-loops and parallel edges are ignored (a node is never its own outside
  neighbour, and "number of neighbours" counts distinct nodes).

Known values, used as tests: ``K_n`` is ceil(n/2)-robust and not more (the
pair "half / other half" has max reach ceil(n/2) and no pair does better);
paths and stars with n >= 2 and rings with n >= 4 are exactly 1-robust (the
3-ring is K_3, 2-robust); a graph is 1-robust iff it is connected (n >= 2).

Two exact deciders are offered:

``"exact"``
    Exhaustive over all disjoint pairs, but not by enumerating the 3^n pairs:
    ``reach`` is computed for all 2^n subsets with bit masks, then a
    subset-minimum ("zeta") transform gives, for every complement mask, the
    smallest reach of any nonempty subset of it.  That covers every disjoint
    pair in O(n 2^n) time and O(2^n) memory (n <= 22).
``"milp"``
    The mixed-integer linear program of Usevitch & Panagou 2020
    ("Determining r- and (r,s)-robustness of digraphs using mixed integer
    linear programming", Automatica 111), solved with
    :func:`scipy.optimize.milp` (HiGHS).  See :func:`_milp_solve`.  Before
    a feasibility MILP, a cheap heuristic (:func:`_heuristic_pair`) looks for
    a violating pair; any pair it returns is verified, so it only ever
    shortens a "not r-robust" answer and never decides "r-robust".

``"auto"`` uses ``"exact"`` for n <= 10 and ``"milp"`` otherwise.
"""
from __future__ import annotations

import numbers
import time
from typing import Any, Hashable, Iterable

import networkx as nx

from ..core.errors import InputError, MeshsimError
# the searches (bit-mask DP, witness heuristic, MILP) live in .reach
from .reach import _exact_min_reach, _heuristic_pair, _milp_solve, _pair_value

__all__ = [
    "EXACT_AUTO_MAX_N",
    "EXACT_MAX_N",
    "METHODS",
    "robustness",
    "is_r_robust",
    "min_reach",
    "violating_pair",
    "robustness_bounds",
    "robustness_report",
    "is_f_local",
    "f_local_violations",
    "byzantine_neighbour_counts",
]

#: "auto" switches from the bit-mask enumeration to the MILP above this size.
EXACT_AUTO_MAX_N = 10
#: Largest graph the bit-mask enumeration accepts (2^22 masks ~ a few 10 MB).
EXACT_MAX_N = 22
METHODS = ("auto", "exact", "milp")

Pair = tuple[frozenset, frozenset]


# --------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------

def robustness(G: nx.Graph, method: str = "auto", time_limit: float | None = None, *,
               heuristic: bool = True) -> int:
    """Largest r such that ``G`` is r-robust (SAC paper Def. 3.3); 0 if none.

    Cheap bounds settle many graphs without a search: 0 for n < 2 or a
    disconnected graph, and ``lower <= r <= upper`` from
    :func:`robustness_bounds`.  Otherwise ``"exact"`` evaluates the min-max
    directly, and ``"milp"`` searches downward from the upper bound: a pair
    of sets that are both not ``upper``-reachable lowers the bound to that
    pair's max reach, and a proof that no such pair exists (an infeasible MILP
    of Usevitch & Panagou 2020) ends the search.  With ``heuristic`` (default)
    such pairs are first sought by a cheap, verified search, so the solver is
    usually left with a single infeasibility proof.  ``time_limit`` (seconds)
    is the budget for the whole call; running out raises
    :class:`~meshsim.core.errors.MeshsimError`.
    """
    nodes, adj = _prepare(G)
    method = _check_method(method, len(nodes))
    deadline = _deadline(time_limit)
    lo, hi = _bounds(nodes, adj, G)
    if lo >= hi:
        return hi
    if method == "exact":
        return _exact_min_reach(adj)[0]
    # Each step is the pure feasibility problem "max reach <= hi - 1", which
    # HiGHS settles faster than the optimisation "minimise t" (measured in
    # tests/benchmarks/bench_robustness.py).
    while hi > lo:
        pair = _heuristic_pair(adj, hi, deadline) if heuristic else None
        if pair is None:
            pair = _milp_solve(adj, t_max=hi - 1, deadline=deadline)
            if pair is None:
                return hi
        hi = _pair_value(adj, *pair)
    return hi


def is_r_robust(G: nx.Graph, r: int, method: str = "auto",
                time_limit: float | None = None, *, heuristic: bool = True) -> bool:
    """Whether ``G`` is r-robust (SAC paper Def. 3.3).

    Every graph is 0-robust.  ``r`` must be a non-negative integer; directed
    graphs are rejected (:class:`~meshsim.core.errors.InputError`).  The bounds of
    :func:`robustness_bounds` answer without search when they can; otherwise
    ``"exact"`` enumerates all disjoint pairs (bit-mask DP) and ``"milp"``
    asks whether a pair with ``max(reach(S1), reach(S2)) <= r - 1`` exists
    (Usevitch & Panagou 2020), after a cheap witness search if ``heuristic``.
    ``time_limit`` (seconds) is passed to HiGHS; if it runs out before the
    question is settled a :class:`~meshsim.core.errors.MeshsimError` is raised.
    """
    _check_r(r)
    nodes, adj = _prepare(G)
    method = _check_method(method, len(nodes))
    deadline = _deadline(time_limit)
    if r == 0:
        return True
    lo, hi = _bounds(nodes, adj, G)
    if r <= lo:
        return True
    if r > hi:
        return False
    if method == "exact":
        return _exact_min_reach(adj)[0] >= r
    if heuristic and _heuristic_pair(adj, r, deadline) is not None:
        return False
    return _milp_solve(adj, t_max=r - 1, deadline=deadline) is None


def min_reach(G: nx.Graph, method: str = "auto", time_limit: float | None = None) -> int:
    """``min over disjoint nonempty S1, S2 of max(reach(S1), reach(S2))``.

    This *is* the robustness of ``G`` (the graph is r-robust iff the value is
    >= r), computed without the shortcuts of :func:`robustness`: ``"exact"``
    runs the bit-mask DP, ``"milp"`` solves the optimisation form of the
    Usevitch & Panagou 2020 MILP (minimise t) in one solve.  Returns 0 for
    n < 2 (the minimum over no pairs; see the module conventions).  For K_n
    it is ceil(n/2): with |S1| <= |S2|, |S1| <= floor(n/2), so each node of
    S1 has n - |S1| >= ceil(n/2) outside neighbours, and the halves attain it.
    """
    nodes, adj = _prepare(G)
    method = _check_method(method, len(nodes))
    deadline = _deadline(time_limit)
    if len(nodes) < 2:
        return 0
    if method == "exact":
        return _exact_min_reach(adj)[0]
    pair = _milp_solve(adj, t_max=None, deadline=deadline)
    assert pair is not None  # the optimisation form is always feasible for n >= 2
    return _pair_value(adj, *pair)


def violating_pair(G: nx.Graph, r: int, method: str = "auto",
                   time_limit: float | None = None, *, heuristic: bool = True) -> Pair | None:
    """A witness that ``G`` is *not* r-robust, or None if it is.

    Returns disjoint nonempty node sets ``(S1, S2)`` (frozensets of the
    graph's own labels), neither of which is r-reachable.  No bound shortcuts
    are taken; with ``method="milp"`` and ``heuristic=False`` the answer comes
    from the solver alone.  For n < 2 (not 1-robust by convention, but there
    is no pair) ``None`` is returned.
    """
    _check_r(r)
    nodes, adj = _prepare(G)
    method = _check_method(method, len(nodes))
    deadline = _deadline(time_limit)
    if r == 0 or len(nodes) < 2:
        return None
    if method == "exact":
        value, pair = _exact_min_reach(adj)
        found = pair if value < r else None
    else:
        found = _heuristic_pair(adj, r, deadline) if heuristic else None
        if found is None:
            found = _milp_solve(adj, t_max=r - 1, deadline=deadline)
    if found is None:
        return None
    s1, s2 = found
    return frozenset(nodes[i] for i in s1), frozenset(nodes[i] for i in s2)


def robustness_bounds(G: nx.Graph) -> tuple[int, int]:
    """Cheap ``(lower, upper)`` bounds on the robustness of ``G``.

    * upper = min(min degree, ceil(n/2)): ``{v}`` vs. ``V - {v}`` has max
      reach deg(v) (v's neighbours each see one outside node), and
      "floor(n/2) nodes" vs. "the rest" has max reach <= ceil(n/2);
    * lower = max(1, min degree - floor(n/2) + 1) for connected graphs
      (LeBlanc et al. 2013: with |S1| <= |S2|, |S1| <= floor(n/2), and a node
      of S1 has at least deg - (|S1| - 1) outside neighbours);
    * both 0 for n < 2 or a disconnected graph.
    """
    nodes, adj = _prepare(G)
    return _bounds(nodes, adj, G)


#: largest graph :func:`robustness_report` settles by enumeration (2^16 masks: milliseconds)
REPORT_EXACT_MAX_N = 16


def robustness_report(G: nx.Graph, F: int, time_limit: float = 10.0) -> dict[str, Any]:
    """What a SAC / CP-WBFT run reports about its graph (``summary.graph``).

    ``r_robustness`` is the largest r for which ``G`` is r-robust: from the
    cheap bounds when they meet, by enumeration up to
    ``REPORT_EXACT_MAX_N`` nodes, else by the MILP of Usevitch & Panagou 2020
    with a wall-clock budget of ``time_limit`` seconds. ``f_plus_1_robust``
    answers the question SAC's guarantees need (Property 4.3-4.4: is G
    (F+1)-robust?), settled first with half the budget because one
    feasibility MILP usually answers it long before the exact r is proved.
    Whatever the solver does not settle in time is reported as the string
    ``"undecided within N s"`` (never a silent null), with ``r_bounds`` =
    [lower, upper] as far as the search got. A budget that runs out makes the
    answer depend on the machine's speed; graphs up to 100 agents of the SAC
    families settle in a few seconds.
    """
    _check_F(F)
    nodes, adj = _prepare(G)
    n = len(nodes)
    lo, hi = _bounds(nodes, adj, G)
    undecided = f"undecided within {time_limit:g} s"
    info: dict[str, Any] = {"nodes": n, "min_degree": min((a.bit_count() for a in adj), default=0),
                            "r_robustness": None, "r_bounds": [lo, hi], "r_method": None,
                            "f_plus_1_robust": None, "time_limit_s": time_limit}
    need = F + 1
    if lo >= hi:
        info.update(r_robustness=hi, r_method="bounds", f_plus_1_robust=hi >= need)
        return info
    if n <= REPORT_EXACT_MAX_N:
        r = _exact_min_reach(adj)[0]
        info.update(r_robustness=r, r_bounds=[r, r], r_method="exact", f_plus_1_robust=r >= need)
        return info
    info["r_method"] = "milp"
    start = time.monotonic()
    deadline = start + float(time_limit)
    # 1. the question that matters: (F+1)-robust?
    if need <= lo:
        info["f_plus_1_robust"] = True
    elif need > hi:
        info["f_plus_1_robust"] = False
    else:
        try:
            half = start + float(time_limit) / 2
            pair = _heuristic_pair(adj, need, half)
            if pair is None:
                pair = _milp_solve(adj, t_max=need - 1, deadline=half)
            if pair is None:
                info["f_plus_1_robust"] = True
                lo = max(lo, need)
            else:
                info["f_plus_1_robust"] = False
                hi = min(hi, _pair_value(adj, *pair))
        except MeshsimError:
            info["f_plus_1_robust"] = undecided
    # 2. the exact r: search downward from the upper bound (as robustness())
    try:
        while hi > lo:
            pair = _heuristic_pair(adj, hi, deadline)
            if pair is None:
                pair = _milp_solve(adj, t_max=hi - 1, deadline=deadline)
                if pair is None:
                    lo = hi
                    break
            hi = _pair_value(adj, *pair)
        info["r_robustness"] = hi
    except MeshsimError:
        info["r_robustness"] = undecided
    info["r_bounds"] = [lo, hi]
    if info["f_plus_1_robust"] == undecided and isinstance(info["r_robustness"], int):
        info["f_plus_1_robust"] = info["r_robustness"] >= need
    return info


def byzantine_neighbour_counts(G: nx.Graph, byzantine: Iterable[Hashable]) -> dict:
    """For every node of ``G``, how many of its neighbours are Byzantine."""
    _check_undirected(G)
    bad = _check_byzantine(G, byzantine)
    return {v: sum(1 for u in G.adj[v] if u != v and u in bad) for v in G.nodes}


def f_local_violations(G: nx.Graph, byzantine: Iterable[Hashable], F: int) -> dict:
    """Nodes with more than ``F`` Byzantine neighbours, mapped to that count.

    F-local model (LeBlanc et al. 2013): every node -- Byzantine ones
    included -- may have at most F Byzantine nodes among its neighbours.
    Together with (2F+1)-robustness (SAC paper Def. 3.3) this is the
    condition under which W-MSR-style filtering reaches resilient consensus.
    """
    _check_F(F)
    counts = byzantine_neighbour_counts(G, byzantine)
    return {v: c for v, c in counts.items() if c > F}


def is_f_local(G: nx.Graph, byzantine: Iterable[Hashable], F: int) -> bool:
    """Whether the Byzantine set is F-local: no node has > F Byzantine neighbours."""
    return not f_local_violations(G, byzantine, F)


# --------------------------------------------------------------------------
# input checks and graph preparation
# --------------------------------------------------------------------------

def _check_undirected(G: Any) -> None:
    if not isinstance(G, nx.Graph):
        raise InputError("expected a networkx graph", field="G", value=type(G).__name__)
    if G.is_directed():
        # The undirected definition (and the Laplacian MILP below) would be
        # silently wrong for digraphs, whose robustness uses in-neighbours.
        raise InputError("r-robustness here is defined for undirected graphs only",
                         field="G", value=type(G).__name__)


def _prepare(G: Any) -> tuple[list, list[int]]:
    """Node list and neighbour bit masks (self-loops dropped)."""
    _check_undirected(G)
    nodes = list(G.nodes)
    index = {v: i for i, v in enumerate(nodes)}
    adj = []
    for v in nodes:
        m = 0
        for u in G.adj[v]:
            if u != v:
                m |= 1 << index[u]
        adj.append(m)
    return nodes, adj


def _check_int(value: Any, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError("must be an integer", field=field, value=value)
    if value < 0:
        raise InputError("must be >= 0", field=field, value=value)


def _check_r(r: Any) -> None:
    _check_int(r, "r")


def _check_F(F: Any) -> None:
    _check_int(F, "F")


def _check_byzantine(G: nx.Graph, byzantine: Any) -> set:
    if isinstance(byzantine, (str, bytes)) or not isinstance(byzantine, Iterable):
        raise InputError("must be an iterable of nodes", field="byzantine", value=byzantine)
    bad = set(byzantine)
    unknown = [v for v in bad if v not in G]
    if unknown:
        raise InputError("Byzantine nodes not in the graph", field="byzantine", value=unknown)
    return bad


def _check_method(method: Any, n: int) -> str:
    if method not in METHODS:
        raise InputError(f"unknown method, expected one of {METHODS}", field="method",
                         value=method)
    if method == "auto":
        return "exact" if n <= EXACT_AUTO_MAX_N else "milp"
    if method == "exact" and n > EXACT_MAX_N:
        raise InputError(f"method 'exact' supports at most {EXACT_MAX_N} nodes; use 'milp'",
                         field="method", value=n)
    return method


def _deadline(time_limit: Any) -> float | None:
    if time_limit is None:
        return None
    if isinstance(time_limit, bool) or not isinstance(time_limit, numbers.Real) \
            or not time_limit > 0:  # type: ignore[operator]  # (numbers.Real has no < in typeshed)
        raise InputError("must be a positive number of seconds", field="time_limit",
                         value=time_limit)
    return time.monotonic() + float(time_limit)


def _bounds(nodes: list, adj: list[int], G: nx.Graph) -> tuple[int, int]:
    n = len(nodes)
    if n < 2 or not nx.is_connected(G):
        return 0, 0
    delta = min(m.bit_count() for m in adj)
    hi = min(delta, (n + 1) // 2)
    lo = max(1, delta - n // 2 + 1)
    return min(lo, hi), hi
