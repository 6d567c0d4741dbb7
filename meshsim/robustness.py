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
paths, rings and stars with n >= 2 are exactly 1-robust; a graph is 1-robust
iff it is connected (n >= 2).

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
    :func:`scipy.optimize.milp` (HiGHS).  See :func:`_milp_solve`.

``"auto"`` uses ``"exact"`` for n <= 10 and ``"milp"`` otherwise.
"""
from __future__ import annotations

import math
import numbers
import time
from typing import Any, Hashable, Iterable

import networkx as nx
import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from meshsim.errors import InputError, MeshsimError

__all__ = [
    "EXACT_AUTO_MAX_N",
    "EXACT_MAX_N",
    "METHODS",
    "robustness",
    "is_r_robust",
    "min_reach",
    "violating_pair",
    "robustness_bounds",
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

def robustness(G: nx.Graph, method: str = "auto", time_limit: float | None = None) -> int:
    """Largest r such that ``G`` is r-robust (SAC paper Def. 3.3); 0 if none.

    Cheap bounds settle many graphs without a search: 0 for n < 2 or a
    disconnected graph, and ``lower <= r <= upper`` from
    :func:`robustness_bounds`.  Otherwise ``"exact"`` evaluates the min-max
    directly and ``"milp"`` tightens the upper bound with feasibility MILPs
    (each witness pair found lowers it to that pair's max reach) until one is
    proved infeasible (Usevitch & Panagou 2020).  ``time_limit`` (seconds) is
    the budget for all MILP solves together; exceeding it raises
    :class:`~meshsim.errors.MeshsimError`.
    """
    nodes, adj = _prepare(G)
    method = _check_method(method, len(nodes))
    deadline = _deadline(time_limit)
    lo, hi = _bounds(nodes, adj, G)
    if lo >= hi:
        return hi
    if method == "exact":
        return _exact_min_reach(adj)[0]
    # MILP: descend from the upper bound.  A feasible pair at "t <= hi - 1"
    # has max reach m < hi, hence robustness <= m; infeasibility proves
    # robustness >= hi.  Each step is a pure feasibility problem, which HiGHS
    # answers much faster than the optimisation "minimise t" (see module
    # benchmark tests/benchmarks/bench_robustness.py).
    while hi > lo:
        pair = _milp_solve(adj, t_max=hi - 1, deadline=deadline)
        if pair is None:
            return hi
        hi = _pair_value(adj, *pair)
    return hi


def is_r_robust(G: nx.Graph, r: int, method: str = "auto",
                time_limit: float | None = None) -> bool:
    """Whether ``G`` is r-robust (SAC paper Def. 3.3).

    Every graph is 0-robust.  ``r`` must be a non-negative integer; directed
    graphs are rejected (:class:`~meshsim.errors.InputError`).  The bounds of
    :func:`robustness_bounds` answer without search when they can; otherwise
    ``"exact"`` enumerates all disjoint pairs (bit-mask DP) and ``"milp"``
    asks whether a pair with ``max(reach(S1), reach(S2)) <= r - 1`` exists
    (Usevitch & Panagou 2020).  ``time_limit`` (seconds) is passed to HiGHS;
    if it runs out before the question is settled a
    :class:`~meshsim.errors.MeshsimError` is raised.
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
    return _milp_solve(adj, t_max=r - 1, deadline=deadline) is None


def min_reach(G: nx.Graph, method: str = "auto", time_limit: float | None = None) -> int:
    """``min over disjoint nonempty S1, S2 of max(reach(S1), reach(S2))``.

    This *is* the robustness of ``G`` (the graph is r-robust iff the value is
    >= r), computed without the shortcuts of :func:`robustness`: ``"exact"``
    runs the bit-mask DP, ``"milp"`` solves the optimisation form of the
    Usevitch & Panagou 2020 MILP (minimise t).  Returns 0 for n < 2 (the
    minimum over no pairs; see the module conventions).  For K_n it is
    ceil(n/2): with |S1| <= |S2|, |S1| <= floor(n/2), so each node of S1 has
    n - |S1| >= ceil(n/2) outside neighbours, and the halves attain it.
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
                   time_limit: float | None = None) -> Pair | None:
    """A witness that ``G`` is *not* r-robust, or None if it is.

    Returns disjoint nonempty node sets ``(S1, S2)`` (frozensets of the
    graph's own labels), neither of which is r-reachable.  For n < 2 (not
    1-robust by convention, but there is no pair) ``None`` is returned.
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
            or not time_limit > 0:
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


def _reach(adj: list[int], members: Iterable[int]) -> int:
    s = 0
    for i in members:
        s |= 1 << i
    return max(((adj[i] & ~s).bit_count() for i in members), default=0)


def _pair_value(adj: list[int], s1: Iterable[int], s2: Iterable[int]) -> int:
    return max(_reach(adj, s1), _reach(adj, s2))


# --------------------------------------------------------------------------
# "exact": bit-mask dynamic programme over all 2^n subsets
# --------------------------------------------------------------------------

def _exact_min_reach(adj: list[int]) -> tuple[int, tuple[list[int], list[int]] | None]:
    """Exact min over disjoint nonempty pairs of max reach, and a minimising pair.

    Rather than enumerating the 3^n ordered pairs, compute ``R[S] = reach(S)``
    for every mask S (n vectorised passes), then ``best[M] = min R[T]`` over
    nonempty ``T subset of M`` by a subset-minimum transform (n passes).  For
    each S1, the best partner is then ``best[V - S1]``, so the answer is
    ``min_S1 max(R[S1], best[V - S1])``.  This is exhaustive, exploits the
    S1 <-> S2 symmetry implicitly, and costs O(n 2^n).
    """
    n = len(adj)
    if n < 2:
        return 0, None
    size = 1 << n
    full = size - 1
    masks = np.arange(size, dtype=np.uint32)
    comp = masks ^ np.uint32(full)
    reach = np.zeros(size, dtype=np.int16)
    for i, a in enumerate(adj):
        out = np.bitwise_count(comp & np.uint32(a)).astype(np.int16)
        in_s = ((masks >> np.uint32(i)) & np.uint32(1)).astype(bool)
        np.maximum(reach, out, out=reach, where=in_s)
    best = reach.copy()
    best[0] = np.iinfo(np.int16).max  # the empty set is not a valid partner
    for i in range(n):
        view = best.reshape(-1, 2, 1 << i)  # [high bits, bit i, low bits]
        np.minimum(view[:, 1, :], view[:, 0, :], out=view[:, 1, :])
    # comp[S] == full - S, so best[comp] is best reversed.
    value = np.maximum(reach, best[::-1])
    value[0] = value[full] = np.iinfo(np.int16).max  # S1 and S2 must be nonempty
    s1 = int(np.argmin(value))
    result = int(value[s1])
    rest = full ^ s1
    # A partner attaining best[rest]: a nonempty submask of rest with that reach.
    cand = np.flatnonzero(((masks & np.uint32(s1)) == 0) & (masks != 0)
                          & (reach == best[rest]))
    s2 = int(cand[0])
    bits = lambda m: [i for i in range(n) if m >> i & 1]  # noqa: E731
    return result, (bits(s1), bits(s2))


# --------------------------------------------------------------------------
# "milp": Usevitch & Panagou 2020
# --------------------------------------------------------------------------

def _milp_solve(adj: list[int], t_max: int | None,
                deadline: float | None) -> tuple[list[int], list[int]] | None:
    """Solve the r-robustness MILP of Usevitch & Panagou 2020 (undirected case).

    Variables: binary indicators ``b1, b2`` of S1, S2 and an integer ``t``.

    * ``b1 + b2 <= 1``                     (disjoint)
    * ``sum b1 >= 1``, ``sum b2 >= 1``     (nonempty)
    * ``L b_k <= t`` for k = 1, 2, with L = D - A the Laplacian.  Row i reads
      ``deg(i) b_k[i] - sum_{j in N(i)} b_k[j]``: for i in S_k that is the
      number of i's neighbours outside S_k, for i not in S_k it is <= 0 <= t
      (the big-M is the degree, folded into L).  So the rows say
      ``max(reach(S1), reach(S2)) <= t``.
    * symmetry breaking (S1 <-> S2 swap): ``b2[i] <= sum_{j<i} b1[j]``, i.e.
      the lowest-numbered node of S1 u S2 is in S1; b2[0] = 0.

    With ``t_max=None`` minimise t: the optimum is min_reach(G).  With
    ``t_max=r-1`` solve the pure feasibility problem ``t <= r-1`` (objective
    0, so HiGHS stops at the first solution): feasible iff G is not r-robust.
    Returns the (S1, S2) index lists of the solution, or None if infeasible.
    Raises MeshsimError if the time budget ends before the answer is proved.
    """
    n = len(adj)
    deg = np.array([a.bit_count() for a in adj], dtype=float)
    rows, cols = [], []
    for i, a in enumerate(adj):
        for j in range(n):
            if a >> j & 1:
                rows.append(i)
                cols.append(j)
    A = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    L = sparse.diags(deg) - A
    eye = sparse.identity(n, format="csr")
    zero = sparse.csr_matrix((n, n))
    ones_row = sparse.csr_matrix(np.ones((1, n)))
    zero_row = sparse.csr_matrix((1, n))
    col_t = sparse.csr_matrix(-np.ones((n, 1)))
    zcol_n = sparse.csr_matrix((n, 1))
    zcol_1 = sparse.csr_matrix((1, 1))
    strict_lower = sparse.csr_matrix(np.tril(np.ones((n, n)), k=-1))
    blocks = [
        [eye, eye, zcol_n],                 # b1 + b2 <= 1
        [ones_row, zero_row, zcol_1],       # |S1| >= 1
        [zero_row, ones_row, zcol_1],       # |S2| >= 1
        [L, zero, col_t],                   # L b1 - t <= 0
        [zero, L, col_t],                   # L b2 - t <= 0
        [-strict_lower, eye, zcol_n],       # b2[i] - sum_{j<i} b1[j] <= 0
    ]
    lb = np.concatenate([np.full(n, -np.inf), [1, 1], np.full(3 * n, -np.inf)])
    ub = np.concatenate([np.ones(n), [np.inf, np.inf], np.zeros(3 * n)])
    cons = LinearConstraint(sparse.bmat(blocks, format="csr"), lb, ub)

    t_hi = float(max(deg.max(initial=0), 0) if t_max is None else t_max)
    var_lb = np.zeros(2 * n + 1)
    var_ub = np.concatenate([np.ones(2 * n), [t_hi]])
    var_ub[n] = 0.0  # b2[0] = 0 by the symmetry breaking
    c = np.zeros(2 * n + 1)
    if t_max is None:
        c[-1] = 1.0

    options: dict[str, Any] = {"disp": False, "presolve": True, "mip_rel_gap": 0.0}
    if deadline is not None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise MeshsimError("r-robustness MILP: time limit exhausted before the solve")
        options["time_limit"] = remaining
    res = milp(c, constraints=cons, integrality=np.ones(2 * n + 1),
               bounds=Bounds(var_lb, var_ub), options=options)

    if res.status == 2:  # proved infeasible
        return None
    found = res.x is not None and (res.status == 0 or t_max is not None)
    # For the feasibility form any feasible point settles the question even
    # if the solver then stopped on the limit; the optimisation form needs a
    # proof of optimality.
    if not found:
        if res.status == 1:
            raise MeshsimError(
                "r-robustness MILP hit its time limit before proving "
                f"{'optimality' if t_max is None else 'feasibility or infeasibility'} "
                f"(n={n}); raise time_limit or use a smaller graph")
        raise MeshsimError(f"r-robustness MILP failed: {res.message} (status {res.status})")
    x = np.round(res.x).astype(int)
    s1 = [i for i in range(n) if x[i] == 1]
    s2 = [i for i in range(n) if x[n + i] == 1]
    # Re-check in exact integer arithmetic; guards against solver tolerances.
    value = _pair_value(adj, s1, s2)
    if not s1 or not s2 or set(s1) & set(s2) \
            or (t_max is not None and value > t_max) \
            or (t_max is None and value != round(res.fun)):
        raise MeshsimError("r-robustness MILP returned an inconsistent solution "
                           f"(S1={s1}, S2={s2}, value={value})")
    return s1, s2
