"""Byzantine MeshHeal agents: what a liar changes in the messages it sends (issue 20).

The MeshHeal paper assumes honest agents whose models may degrade (Sec. 3);
its detector (Sec. 4.2.2) is built on what neighbours say — review scores,
recent mean scores μ, mean shortfalls x̄ (whose median and 25th percentile
normalise every z), routing states and distance adverts (Sec. 4.1). Every one
of those can be forged by the neighbour that sends it. A :class:`Lies` is the
configuration of one compromised controller; scenario events
(:mod:`meshsim.scenario.events`: ``frame``, ``shield``, ``poison``, ``route_lie``,
``honest``) set it. Pure rules, no simpy and no messages:
:class:`~.agent.MeshHealAgent` asks these functions what to put into a message
it was going to send anyway.

A liar sends only messages an honest agent could send (same kinds, same
fields, values in range: tests/network/test_payloads.py) and reads only its own state,
the messages it received and — as scripted in the scenario — its coalition's
member list and targets (tests/protocols/test_adversarial.py checks locality).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

__all__ = ["Lies", "apply_behaviour", "rescore", "summary_lie", "state_lie", "route_lies", "REVIEW_MODES"]

#: review-request modes in which a reviewer returns scores (App. D.1): the initial
#: three calls ("review") and both committee rounds ("committee")
REVIEW_MODES = {"initial": "review", "r1": "committee", "r2": "committee"}


@dataclass
class Lies:
    """One agent's Byzantine behaviours (all off: an honest controller).

    ``frame`` / ``shield``: producers whose outputs this agent scores ``frame_score``
    / ``shield_score`` whatever its model said, in the roles listed in
    ``frame_as`` / ``shield_as`` (``review``: the initial calls; ``committee``: both
    rounds). ``mu`` / ``xbar`` / ``state``: per-neighbour lies in summaries and
    routing-state adverts — one value for every neighbour or a list dealt out
    round-robin over the neighbours in name order; ``None`` (or a ``None`` in
    the list) is the truth. ``route``: ability -> advertised distance;
    ``hole``: ``black`` drops every task that reaches it over a link, ``grey``
    answers a ``hole_rate`` share of them itself, unreviewed.
    """

    coalition: frozenset = frozenset()
    frame: frozenset = frozenset()
    frame_score: float = 0.05
    frame_as: frozenset = frozenset({"review", "committee"})
    shield: frozenset = frozenset()
    shield_score: float = 0.95
    shield_as: frozenset = frozenset({"review", "committee"})
    mu: Any = None
    xbar: Any = None
    state: Any = None
    route: dict = field(default_factory=dict)
    route_all: Optional[int] = None  # distance advertised for every ability heard of
    hole: Optional[str] = None
    hole_rate: float = 0.0

    @property
    def active(self) -> bool:
        return bool(self.frame or self.shield or self.mu is not None or self.xbar is not None
                    or self.state is not None or self.route or self.route_all is not None or self.hole)

    @property
    def poisons_summaries(self) -> bool:
        return self.mu is not None or self.xbar is not None


def rescore(lies: Optional[Lies], mode: str, producer: Optional[str], result: dict) -> dict:
    """A review reply as the liar sends it: its honest ``result`` with the scores
    replaced for a framed (low) or shielded (high) producer. Same keys, scores in
    [0, 1]: exactly what an honest reviewer's reply could hold."""
    role = REVIEW_MODES.get(mode)
    if lies is None or role is None or producer is None:
        return result
    if producer in lies.frame and role in lies.frame_as:
        score = lies.frame_score
    elif producer in lies.shield and role in lies.shield_as:
        score = lies.shield_score
    else:
        return result
    out = dict(result)
    if "scores" in out:
        out["scores"] = [score] * len(out["scores"])
    if "score" in out:
        out["score"] = score
    return out


def _deal(value: Any, peer: str, peers: Sequence[str]) -> Any:
    """One neighbour's lie: a single value for all, or a list dealt round-robin
    over the sorted neighbours (different lies to different neighbours)."""
    if isinstance(value, (list, tuple)):
        order = sorted(peers)
        i = order.index(peer) if peer in order else 0
        return value[i % len(value)] if value else None
    return value


def summary_lie(lies: Optional[Lies], peer: str, peers: Sequence[str], mu: Optional[float],
                xbar: Optional[float]) -> tuple[Optional[float], Optional[float]]:
    """(μ, x̄) as advertised to ``peer``; None in the lie keeps the truth."""
    if lies is None:
        return mu, xbar
    lm, lx = _deal(lies.mu, peer, peers), _deal(lies.xbar, peer, peers)
    return (mu if lm is None else float(lm)), (xbar if lx is None else float(lx))


def state_lie(lies: Optional[Lies], peer: str, peers: Sequence[str], state: str) -> str:
    """The routing state (normal / watched / isolated) advertised to ``peer``."""
    if lies is None:
        return state
    s = _deal(lies.state, peer, peers)
    return state if s is None else str(s)


def route_lies(lies: Optional[Lies], universe: Sequence[str]) -> dict[str, int]:
    """ability -> false distance the liar advertises (distance-vector adverts, Sec. 4.1)."""
    if lies is None:
        return {}
    out = {s: lies.route_all for s in universe} if lies.route_all is not None else {}
    out.update(lies.route)
    return out


def apply_behaviour(cur: Optional[Lies], kind: str, spec: dict) -> Lies:
    """``cur`` with one scenario event's behaviour added (``honest`` clears all)."""
    from dataclasses import replace

    lies = cur or Lies()
    coalition = lies.coalition | frozenset(spec.get("coalition", ()))
    if kind == "honest":
        return Lies()
    if kind == "frame":
        return replace(lies, coalition=coalition, frame=lies.frame | frozenset(spec["targets"]),
                       frame_score=spec["score"], frame_as=frozenset(spec["roles"]))
    if kind == "shield":
        return replace(lies, coalition=coalition, shield=lies.shield | frozenset(spec["targets"]),
                       shield_score=spec["score"], shield_as=frozenset(spec["roles"]))
    if kind == "poison":
        return replace(lies, coalition=coalition,
                       mu=spec["mu"] if spec.get("mu") is not None else lies.mu,
                       xbar=spec["xbar"] if spec.get("xbar") is not None else lies.xbar,
                       state=spec["state"] if spec.get("state") is not None else lies.state)
    if kind == "route_lie":
        d = int(spec["distance"])
        hole = None if spec["hole"] == "none" else spec["hole"]
        if spec["abilities"] == "all":
            return replace(lies, coalition=coalition, route_all=d, hole=hole, hole_rate=spec["rate"])
        return replace(lies, coalition=coalition, route={**lies.route, **{s: d for s in spec["abilities"]}},
                       hole=hole, hole_rate=spec["rate"])
    raise ValueError(f"unknown Byzantine behaviour {kind!r}")
