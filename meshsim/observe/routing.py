"""Routing as an outside observer sees it: true distances over up links, wrong
table entries, per-event convergence windows, and where tasks were lost
(issue 34's route records)."""
from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ..core.names import node_order
from .aggregate import frac
from .views import RoutingView

if TYPE_CHECKING:  # pragma: no cover
    from ..net.network import Network
    from ..net.routing import DistanceVector

__all__ = ["true_distances", "routing_mismatches", "RoutingConvergence", "route_losses"]


def true_distances(net: "Network", tables: Mapping[str, "DistanceVector"], ability: str,
                   infinity: int) -> dict[str, int]:
    """Hop distance from every agent to the nearest eligible holder over *up* links.

    Capped at ``infinity`` (unreachable, or at least the hop limit away).
    """
    adj: dict[str, list[str]] = {v: [] for v in net.nodes}
    for (u, v), link in net.links.items():
        if link.up:
            adj[u].append(v)
            adj[v].append(u)
    dist = {v: 0 for v, t in tables.items() if ability in t.held}
    queue = deque(dist)
    while queue:
        u = queue.popleft()
        if dist[u] + 1 >= infinity:
            continue
        for w in adj[u]:
            if w not in dist:
                dist[w] = dist[u] + 1
                queue.append(w)
    return {v: dist.get(v, infinity) for v in net.nodes}


def routing_mismatches(net: "Network", tables: Mapping[str, "DistanceVector"]) -> list[tuple]:
    """(agent, ability, table distance, true distance) for every wrong entry."""
    if not tables:
        return []
    infinity = next(iter(tables.values())).infinity
    abilities = sorted({s for t in tables.values() for s in t.universe})
    bad = []
    for s in abilities:
        truth = true_distances(net, tables, s, infinity)
        for v in sorted(tables):
            d = tables[v].distance(s)
            if d != truth[v]:
                bad.append((v, s, d, truth[v]))
    return bad


class RoutingConvergence:
    """Per scenario event: when did routing tables stop changing, and were they right?

    A window opens at each event (and at t=0); it closes when the next event
    fires or the run ends. ``convergence_time`` is the last table change in
    the window minus its start; it is ``None`` if the tables were still wrong
    at the window's end.
    """

    def __init__(self, net: "Network", protocol: RoutingView):
        self.net = net
        self.protocol = protocol
        self.windows: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None
        self._last_change = 0.0
        self.changes = 0

    def changed(self, agent: str, ability: str, distance: int) -> None:
        self._last_change = self.net.env.now
        self.changes += 1

    def open(self, label: str, t: float) -> None:
        self.close()
        self._open = {"event": label, "at": t}
        self._last_change = t

    def close(self) -> None:
        if self._open is None:
            return
        w = self._open
        self._open = None
        bad = routing_mismatches(self.net, self.protocol.routing_tables())
        w["closed_at"] = self.net.env.now
        w["wrong_entries"] = len(bad)
        w["correct"] = not bad
        w["convergence_time"] = (self._last_change - w["at"]) if not bad else None
        self.windows.append(w)

    def summary(self) -> dict[str, Any]:
        self.close()
        final = self.windows[-1] if self.windows else None
        times = [w["convergence_time"] for w in self.windows if w["convergence_time"] is not None]
        return {
            "windows": self.windows,
            "table_changes": self.changes,
            "tables_correct_at_end": bool(final and final["correct"]),
            "max_convergence_time": max(times) if times else None,
            "all_converged": all(w["correct"] for w in self.windows),
        }


def route_losses(lost_rows: Iterable[tuple], start: int, liars: Iterable[str]) -> dict[str, Any]:
    """Where tasks were lost, from the observer's route records (issue 34):
    tasks from ``start`` on that ended unanswered (a black hole's drops time out)
    or wrong (a grey hole's own answers), counted by the last agent each reached,
    and the share of them whose last holder was a routing liar."""
    liars = set(liars)
    out: dict[str, Any] = {}
    for kind in ("unanswered", "wrong"):
        by: dict[str, int] = {}
        for i, holder, k in lost_rows:
            if k == kind and i >= start:
                key = holder if holder is not None else "?"
                by[key] = by.get(key, 0) + 1
        n = sum(by.values())
        at = sum(c for a, c in by.items() if a in liars)
        out[kind] = {"tasks": n, "at_liars": at, "at_liars_share": frac(at, n),
                     # the ten agents holding most of them last, most first ("?", no holder known, leads its tie
                     # as it always has): [agent, tasks] pairs
                     "by_last_holder": [[a, c] for a, c in sorted(by.items(), key=lambda e: (-e[1], e[0] != "?", node_order(e[0])))[:10]]}
    return out
