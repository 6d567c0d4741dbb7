"""The searches behind :mod:`meshsim.graphs.robustness`, on neighbour bit masks.

A graph arrives here as ``adj``: node i's neighbours as the bits of
``adj[i]`` (self-loops dropped; :func:`meshsim.graphs.robustness._prepare`).
``reach`` and the min-max over disjoint pairs follow SAC Def. 3.3 and
LeBlanc et al. 2013 (definitions in :mod:`meshsim.graphs.robustness`):

* :func:`_exact_min_reach`: the bit-mask dynamic programme over all 2^n subsets;
* :func:`_heuristic_pair`: a cheap, verified search for a violating pair
  (never decides "r-robust");
* :func:`_milp_solve`: the MILP of Usevitch & Panagou 2020 (HiGHS via scipy).
"""
from __future__ import annotations

import time
from typing import Any, Iterable

import networkx as nx
import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from ..core.errors import MeshsimError

__all__: list[str] = []  # private to meshsim.graphs.robustness


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
    return result, (_bits(s1), _bits(s2))


# --------------------------------------------------------------------------
# witness heuristic (used before the MILP; never decides "robust")
# --------------------------------------------------------------------------

def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _peel(adj: list[int], S: int, r: int) -> int:
    """Largest subset of ``S`` that is not r-reachable (as a bit mask).

    Non-r-reachable subsets of S are closed under union (a node of A has at
    least as many outside neighbours w.r.t. A as w.r.t. A u B), so the largest
    one is unique and obtained by repeatedly deleting nodes with >= r
    neighbours outside the current set.
    """
    queue = _bits(S)
    queued = S
    while queue:
        i = queue.pop()
        queued &= ~(1 << i)
        if (adj[i] & ~S).bit_count() >= r:
            S &= ~(1 << i)
            # i's remaining neighbours gained an outside neighbour: recheck them
            again = adj[i] & S & ~queued
            queue.extend(_bits(again))
            queued |= again
    return S


def _spectral_order(adj: list[int]) -> list[int]:
    n = len(adj)
    L = np.zeros((n, n))
    for i, a in enumerate(adj):
        for j in _bits(a):
            L[i, j] = -1.0
        L[i, i] = a.bit_count()
    _, vecs = np.linalg.eigh(L)
    return [int(i) for i in np.argsort(vecs[:, 1], kind="stable")]


def _bfs_order(adj: list[int], start: int) -> list[int]:
    order, seen, k = [start], 1 << start, 0
    while k < len(order):
        new = adj[order[k]] & ~seen
        seen |= new
        order.extend(_bits(new))
        k += 1
    return order


def _repair_bisection(adj: list[int], side: list[int], r: int, iters: int) -> int:
    """Tabu search flipping nodes between two sides to bring every node's
    number of cross-side neighbours below r; returns side 0 as a mask."""
    n = len(adj)
    masks = [0, 0]
    for i, s in enumerate(side):
        masks[s] |= 1 << i
    cross = [(adj[i] & masks[1 - side[i]]).bit_count() for i in range(n)]
    deg = [a.bit_count() for a in adj]
    nbrs = [_bits(a) for a in adj]
    tabu = [0] * n
    excess = lambda c: c - r + 1 if c >= r else 0  # noqa: E731
    for it in range(1, iters + 1):
        total = sum(excess(c) for c in cross)
        if total == 0:
            break
        best_delta, best_i = None, None
        for i in range(n):
            if tabu[i] >= it:
                continue
            # flipping i: its cross count becomes deg - cross; same-side
            # neighbours gain one cross edge, other-side neighbours lose one.
            delta = excess(deg[i] - cross[i]) - excess(cross[i])
            for j in nbrs[i]:
                c = cross[j] + (1 if side[j] == side[i] else -1)
                delta += excess(c) - excess(cross[j])
            if best_delta is None or delta < best_delta:
                best_delta, best_i = delta, i
        if best_i is None:
            break
        i = best_i
        for j in nbrs[i]:
            cross[j] += 1 if side[j] == side[i] else -1
        cross[i] = deg[i] - cross[i]
        side[i] ^= 1
        tabu[i] = it + 7
    return sum(1 << i for i in range(n) if side[i] == 0)


def _heuristic_pair(adj: list[int], r: int,
                    deadline: float | None = None) -> tuple[list[int], list[int]] | None:
    """Try to find disjoint nonempty S1, S2 that are both not r-reachable.

    The MILP is slow at *finding* such pairs when they are rare (objective 0,
    weak LP relaxation), while violating pairs of real graphs are usually
    near-bisections along a sparse cut.  So candidate sides P come from sweeps
    along the spectral (Fiedler) order and BFS orders, and from
    Kernighan-Lin bisections repaired by a small tabu search; each P is peeled
    to its largest non-r-reachable subset S1, and V - S1 to S2.  A pair found
    is a verified witness; finding none proves nothing (the MILP decides).
    """
    n = len(adj)
    if n < 2 or r <= 0:
        return None
    full = (1 << n) - 1

    def attempt(P: int) -> tuple[list[int], list[int]] | None:
        s1 = _peel(adj, P, r)
        if s1 and s1 != full:
            s2 = _peel(adj, full & ~s1, r)
            if s2:
                return _bits(s1), _bits(s2)
        return None

    def expired() -> bool:
        return deadline is not None and time.monotonic() > deadline

    spectral = _spectral_order(adj)
    by_degree = sorted(range(n), key=lambda i: adj[i].bit_count())
    starts = list(dict.fromkeys([spectral[0], spectral[-1]] + by_degree[:6]))
    orders = [spectral, spectral[::-1]] + [_bfs_order(adj, s) for s in starts]
    for order in orders:
        P = 0
        for i in order[:-1]:
            P |= 1 << i
            found = attempt(P)
            if found:
                return found
        if expired():
            return None
    G = nx.Graph()
    G.add_nodes_from(range(n))
    G.add_edges_from((i, j) for i in range(n) for j in _bits(adj[i]) if i < j)
    for seed in range(6):
        a, _ = nx.algorithms.community.kernighan_lin_bisection(G, seed=seed)
        side = [0 if i in a else 1 for i in range(n)]
        P = _repair_bisection(adj, side, r, iters=3 * n)
        found = attempt(P) or attempt(full & ~P)
        if found:
            return found
        if expired():
            return None
    return None


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
    * symmetry breaking (S1 <-> S2 swap): ``b2[i] <= sum_{j before i} b1[j]``
      for a fixed node order (decreasing degree), i.e. the first node of
      S1 u S2 is in S1; the pair (S2, S1) is then never explored twice.

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
    # Symmetry breaking in order of decreasing degree (ties by index): the
    # first node of S1 u S2 in that order goes to S1.  Any order is valid;
    # this one proved infeasibility somewhat faster in our measurements.
    order = sorted(range(n), key=lambda i: -deg[i])
    rank = np.empty(n, dtype=int)
    rank[order] = np.arange(n)
    strict_lower = sparse.csr_matrix((rank[None, :] < rank[:, None]).astype(float))
    blocks = [
        [eye, eye, zcol_n],                 # b1 + b2 <= 1
        [ones_row, zero_row, zcol_1],       # |S1| >= 1
        [zero_row, ones_row, zcol_1],       # |S2| >= 1
        [L, zero, col_t],                   # L b1 - t <= 0
        [zero, L, col_t],                   # L b2 - t <= 0
        [-strict_lower, eye, zcol_n],       # b2[i] - sum_{j before i} b1[j] <= 0
    ]
    lb = np.concatenate([np.full(n, -np.inf), [1, 1], np.full(3 * n, -np.inf)])
    ub = np.concatenate([np.ones(n), [np.inf, np.inf], np.zeros(3 * n)])
    cons = LinearConstraint(sparse.bmat(blocks, format="csr"), lb, ub)

    # t never needs to exceed the bound min(min degree, ceil(n/2)) of
    # robustness_bounds: a smaller box for the optimisation form.
    t_hi = float(min(deg.min(), (n + 1) // 2) if t_max is None else t_max)
    var_lb = np.zeros(2 * n + 1)
    var_ub = np.concatenate([np.ones(2 * n), [t_hi]])
    if n:
        var_ub[n + order[0]] = 0.0  # the first node in the order is never in S2
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
