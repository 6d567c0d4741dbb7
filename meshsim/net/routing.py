"""Distance-vector routing to ability holders (SPEC §1-2, MeshHeal Sec. 4.1).

Each node keeps ``D_i(s)``: the hop distance to the nearest *eligible* holder
of ability ``s`` (0 if it is one itself), learnt only from its neighbours'
advertisements — asynchronous Bellman-Ford. As in RIP:

* triggered updates: any change is advertised at once (coalesced per instant);
* periodic refresh of the full vector, with jitter, so a lost update never
  leaves a stale table;
* a neighbour not heard for ``timeout`` is forgotten;
* split horizon with poison reverse, and a hop-limit ``infinity`` so that a
  withdrawn route never counts to infinity;
* a link going down (the node's own interface) drops that neighbour at once.
"""
from __future__ import annotations

from typing import Callable, Iterable

from .messages import HEADER_BYTES, Message
from .node import Node

__all__ = ["DistanceVector", "DV"]

DV = "dv"


class DistanceVector:
    def __init__(self, node: Node, held: Iterable[str] = (), infinity: int = 16,
                 refresh: float | None = 30.0, timeout: float | None = None, jitter: float = 0.1,
                 on_change: Callable[[str, str, int], None] | None = None):
        if infinity < 2:
            raise ValueError("infinity must be >= 2")
        self.node = node
        self.infinity = int(infinity)
        # refresh None/0: triggered updates only (fine on loss-free links, and
        # it keeps long task streams from paying for idle adverts).
        self.refresh = float(refresh) if refresh else 0.0
        self.timeout = float(timeout) if timeout is not None else (6.0 * self.refresh or float("inf"))
        self.jitter = jitter
        self.on_change = on_change
        self.held: set[str] = set(held)
        # Every ability ever heard of: full refreshes advertise unreachable ones
        # as infinity, so a neighbour still holding an old route drops it.
        self.universe: set[str] = set(self.held)
        self.nbr: dict[str, dict[str, int]] = {}
        self.heard: dict[str, float] = {}
        self.dist: dict[str, int] = {s: 0 for s in self.held}
        self.via: dict[str, str | None] = {s: None for s in self.held}
        self._dirty: set[str] = set()
        self._flush_scheduled = False
        self._rnd = node.env.pyrandom("routing", node.name)
        # A Byzantine controller's false distances (issue 20): ability -> advertised
        # distance, or None (the truth). Only adverts change; the table stays true.
        self.lie: Callable[[str], int | None] | None = None
        # A check of a neighbour's advert, (peer, ability, distance) -> keep it? (issue 34's
        # advert-consistency defence); an advert it rejects counts as "unreachable".
        self.check: Callable[[str, str, int], bool] | None = None
        node.on(DV, self._on_dv)
        node.link_listeners.append(self._on_link)
        # First full advertisement right away, then periodic refresh.
        node.call_later(0.0, self.advertise_all)
        if self.refresh:
            node.call_later(self._period(), self._tick)

    # -- queries (what protocols use) -----------------------------------
    def distance(self, ability: str) -> int:
        """D_i(s), or ``infinity`` when no eligible holder is known."""
        return self.dist.get(ability, self.infinity)

    def next_hops(self, ability: str) -> list[str]:
        """Every up neighbour on a shortest path (sorted), [] if unreachable/held."""
        d = self.distance(ability)
        if d == 0 or d >= self.infinity:
            return []
        links = self.node.links
        return sorted(p for p, vec in self.nbr.items()
                      if vec.get(ability, self.infinity) + 1 == d and p in links and links[p].up)

    def next_hop(self, ability: str) -> str | None:
        return self.via.get(ability)

    def known_abilities(self) -> set[str]:
        return {s for s, d in self.dist.items() if d < self.infinity}

    # -- holder changes --------------------------------------------------
    def advertise(self, ability: str) -> None:
        """This node (again) holds ``ability`` eligibly."""
        if ability not in self.held:
            self.held.add(ability)
            self.universe.add(ability)
            self._recompute((ability,))

    def withdraw(self, ability: str) -> None:
        """This node stops being an eligible holder (e.g. it was isolated)."""
        if ability in self.held:
            self.held.discard(ability)
            self._recompute((ability,))

    def set_held(self, abilities: Iterable[str]) -> None:
        new = set(abilities)
        changed = new ^ self.held
        self.universe |= new
        self.held = new
        self._recompute(changed)

    # -- internals -------------------------------------------------------
    def _period(self) -> float:
        j = self.jitter
        return self.refresh * (1.0 + self._rnd.uniform(-j, j)) if j else self.refresh

    def _best(self, ability: str) -> tuple[int, str | None]:
        if ability in self.held:
            return 0, None
        best, via = self.infinity, None
        for peer, vec in self.nbr.items():
            d = vec.get(ability)
            if d is not None and d + 1 < best:
                best, via = d + 1, peer
            elif d is not None and d + 1 == best and via is not None and peer < via:
                via = peer  # deterministic tie-break, independent of arrival order
        return best, via

    def _recompute(self, abilities: Iterable[str]) -> None:
        for s in abilities:
            d, via = self._best(s)
            old = self.dist.get(s, self.infinity)
            old_via = self.via.get(s)
            if d >= self.infinity:
                if s in self.dist:
                    del self.dist[s]
                    self.via.pop(s, None)
                    self._mark(s, old, self.infinity)
            elif d != old or via != old_via:
                self.dist[s] = d
                self.via[s] = via
                self._mark(s, old, d, via_changed=(via != old_via))

    def _mark(self, s: str, old: int, new: int, via_changed: bool = False) -> None:
        self._dirty.add(s)
        if old != new and self.on_change is not None:
            self.on_change(self.node.name, s, new)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.node.call_later(0.0, self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, set()
        if dirty:
            self._advertise(sorted(dirty))

    def _vector_for(self, peer: str | None, abilities: Iterable[str]) -> dict[str, int]:
        inf = self.infinity
        out = {}
        for s in abilities:
            d = self.dist.get(s, inf)
            if d and self.via.get(s) == peer:
                d = inf  # poison reverse: never offer a route back to where it came from
            if self.lie is not None:
                false = self.lie(s)
                if false is not None:
                    d = false
            out[s] = d
        return out

    def _advertise(self, abilities: list[str]) -> None:
        node = self.node
        # Neighbours that are a next hop for something get a poisoned vector of
        # their own; everyone else gets the same one in a single multicast.
        vias = {v for v in (self.via.get(s) for s in abilities) if v is not None}
        size = HEADER_BYTES + 12 * len(abilities)
        plain = [p for p, link in node.links.items() if link.up and p not in vias]
        if plain:
            node.multicast(plain, DV, self._vector_for(None, abilities), size=size)
        for peer in sorted(vias):
            link = node.links.get(peer)
            if link is not None and link.up:
                node.send(peer, DV, self._vector_for(peer, abilities), size=size)

    def advertise_all(self) -> None:
        # Full table, including withdrawn abilities, as infinity.
        self._advertise(sorted(self.universe))

    def _tick(self) -> None:
        now = self.node.env.now
        stale = [p for p, t in self.heard.items() if now - t > self.timeout]
        for p in stale:
            self._forget(p)
        self.advertise_all()
        self.node.call_later(self._period(), self._tick)

    def _forget(self, peer: str) -> None:
        vec = self.nbr.pop(peer, None)
        self.heard.pop(peer, None)
        if vec:
            self._recompute(sorted(vec))

    def _on_dv(self, msg: Message) -> None:
        peer = msg.src
        link = self.node.links.get(peer)
        if link is None or not link.up:
            return
        self.heard[peer] = self.node.env.now
        vec = self.nbr.setdefault(peer, {})
        inf = self.infinity
        universe = self.universe
        check = self.check
        for s, d in msg.payload.items():
            if s not in universe:
                universe.add(s)
            if check is not None and d < inf and not check(peer, s, d):
                d = inf
            if d >= inf:
                if s in vec:
                    del vec[s]
                    self._update_one(s, peer, inf)
            elif vec.get(s) != d:
                vec[s] = d
                self._update_one(s, peer, d + 1)

    def _update_one(self, s: str, peer: str, cand: int) -> None:
        """Incremental Bellman-Ford step after ``peer`` changed its offer for ``s``.

        O(1) unless the current next hop got worse (then O(degree)); a full
        rescan per advert would make a dense graph's start-up quadratic.
        """
        if s in self.held:
            return
        inf = self.infinity
        cur = self.dist.get(s, inf)
        via = self.via.get(s)
        if cand < cur or (cand == cur and cand < inf and via is not None and peer < via):
            old = cur
            self.dist[s] = cand
            self.via[s] = peer
            self._mark(s, old, cand, via_changed=True)
        elif peer == via and cand > cur:
            self._recompute((s,))

    def _on_link(self, peer: str, up: bool) -> None:
        if up:
            # A new or restored neighbour gets our full table now.
            self.node.call_later(0.0, lambda: self._send_full(peer))
        else:
            self._forget(peer)

    def _send_full(self, peer: str) -> None:
        link = self.node.links.get(peer)
        if link is None or not link.up:
            return
        vec = self._vector_for(peer, sorted(self.universe))
        self.node.send(peer, DV, vec, size=HEADER_BYTES + 12 * len(vec))
