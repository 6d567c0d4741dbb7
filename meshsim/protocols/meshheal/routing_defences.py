"""Defences against routing liars (issue 34, item 5): beyond the MeshHeal paper, off by default.

A black hole (byzantine.py, ``hole: black``) acknowledges a handoff at the
transport level and drops the task; MeshHeal has no end-to-end
acknowledgement, so nobody notices (docs/adversarial.md). Three rules a
controller can switch on, each using only the agent's own state and the
messages it received (tests/network/test_routing_defences.py checks locality):

* **End-to-end acknowledgement** (``e2e_ack``): the agent that finalizes a task
  sends a ``task_ack`` to the neighbour it got the task from, which passes it
  on to its own, back along the route. A forwarder that hears no ack within
  its timeout re-sends its copy of the task to another next hop (up to
  ``e2e_retries`` times). The timeout shrinks with the hops the task had
  already made (:meth:`ForwardWatch.timeout`), so the forwarder next to a
  drop times out first and its retry's ack reaches those before it in time.
* **Forwarding rating** (``rating``, needs ``e2e_ack``), in the spirit of
  watchdog/pathrater (Marti et al., MobiCom 2000): each agent counts, per
  neighbour, the tasks it forwarded there that were acknowledged end to end
  and those that timed out, and routes around a neighbour whose rating
  (a Beta mean with prior ``rate_prior``) falls below ``rate_min`` while
  another neighbour offers a route. Only what the agent itself observed.
* **Advert consistency** (``advert_check``): a neighbour advertising distance 0
  ("I hold it") to an ability it did not declare in its own ``hello`` is
  ignored for that ability. Catches a liar's claims to abilities it lacks,
  not claims to abilities it holds, nor lies of distance ≥ 1.

Pure rules: no simpy, no messages; the controller (agent.py) asks them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

__all__ = ["ForwardWatch", "Pending", "advert_consistent", "rating"]


def rating(acked: int, missed: int, prior: tuple[float, float]) -> float:
    """Posterior mean of a neighbour's delivery rate: (acked + a) / (acked + missed + a + b)."""
    a, b = prior
    return (acked + a) / (acked + missed + a + b)


def advert_consistent(declared: Optional[frozenset], ability: str, d: int, any_ability: str) -> bool:
    """Is a neighbour's advertised distance ``d`` to ``ability`` consistent with the
    abilities it declared itself? Only distance 0 is checked (a holder's claim);
    a neighbour not yet heard from is given the benefit of the doubt, and the
    pseudo-ability every eligible agent holds (``any_ability``) always passes."""
    if d != 0 or ability == any_ability or declared is None:
        return True
    return ability in declared


@dataclass(slots=True)
class Pending:
    """One forwarded task waiting for its end-to-end ack."""

    state: Any  # the task state as it left this agent (a copy)
    dst: str
    tried: frozenset
    deadline: Any
    retries: int = 0


@dataclass
class ForwardWatch:
    """One agent's end-to-end acknowledgement waits and per-neighbour delivery counts."""

    base_timeout: float
    max_retries: int
    prior: tuple[float, float] = (2.0, 1.0)
    min_rating: float = 0.5
    pending: dict[int, Pending] = field(default_factory=dict)
    counts: dict[str, list[int]] = field(default_factory=dict)  # neighbour -> [acked, missed]

    def timeout(self, depth: int) -> float:
        """How long a forwarder waits when the task had made ``depth`` hops before
        this one: base / (1 + depth / 2) — 1, 2/3, 1/2, 2/5 ... of the base."""
        return self.base_timeout / (1.0 + max(0, depth) / 2.0)

    def watch(self, task: int, state: Any, dst: str, tried: Iterable[str], deadline: Any, retries: int = 0) -> None:
        self.pending[task] = Pending(state, dst, frozenset(tried), deadline, retries)

    def _count(self, peer: str, i: int) -> None:
        c = self.counts.get(peer)
        if c is None:
            c = self.counts[peer] = [0, 0]
        c[i] += 1

    def acked(self, task: int, src: str) -> Optional[Pending]:
        """The ack for ``task`` came from ``src``: the pending wait it ends, if any.
        ``src`` is credited (a late ack over a path already given up still counts)."""
        p = self.pending.pop(task, None)
        if p is not None:
            self._count(src, 0)
        return p

    def expired(self, task: int) -> Optional[Pending]:
        """The wait for ``task`` ran out: the neighbour it went to is debited."""
        p = self.pending.pop(task, None)
        if p is not None:
            self._count(p.dst, 1)
        return p

    def rating(self, peer: str) -> float:
        acked, missed = self.counts.get(peer, (0, 0))
        return rating(acked, missed, self.prior)

    def low(self, peer: str) -> bool:
        return self.rating(peer) < self.min_rating

    def route_around(self, hops: list[str], alternatives: list[str], visited: Iterable[str] = ()) -> list[str]:
        """Next hops in the order to try: the well-rated shortest ones, then
        well-rated alternatives (longer routes), then the rated-down ones last
        (a rated-down neighbour is still used when nothing else offers a route).
        When it routes around someone, agents the task already visited (its own
        ``visits``) go after the others, so that two agents that rated the same
        neighbour down do not hand the task back and forth."""
        good = [h for h in hops if not self.low(h)]
        if len(good) == len(hops) and good:
            return hops
        seen = set(good)
        more = [j for j in alternatives if j not in seen and not self.low(j)]
        seen.update(more)
        bad = [h for h in hops if h not in seen]
        out = good + more + bad
        v = set(visited)
        return [h for h in out if h not in v] + [h for h in out if h in v] if v else out
