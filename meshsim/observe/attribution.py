"""What an attack caused (issue 34, item 4): the paired run and who can reach whom.

The attack metrics of a Byzantine MeshHeal run (``adversarial`` in the summary,
:func:`meshsim.observe.adversarial.adversarial_summary`) observe isolations; a healthy agent
is sometimes isolated with no liar at all (MeshHeal's background false
isolations). Two rules separate the attack's effect from that background:

* **Reach, decided before the run.** A framer or shielder acts only through the
  review scores it returns, and MeshHeal asks for reviews only from direct
  neighbours that hold every ability of the output (Sec. 4.2.1). A liar that is
  never linked to its target, or holds none of the target's abilities, can
  never review it: its framing or shielding cannot touch the target and counts
  0. :func:`reach_warnings` says so before a run (``meshsim validate``),
  from the graph, the link and agent events and the abilities.
* **The paired run.** The same scenario and seed without the Byzantine events
  (:func:`without_liars`). Every random stream is keyed by a name (the agent's,
  the link's, ``events/byzantine`` for drawn liars) and none by the liars'
  presence, so the two runs draw the same numbers until the lies change what
  happens (a scenario whose lies reach nobody gives identical runs: tested).
  An isolation counts as the attack's when the paired run has no matching one
  by then: a framed target isolated while healthy at task c counts only if, in
  the paired run, it was not isolated while healthy between the first frame and
  c; a shielded target that stayed unisolated through its degradation counts
  only if the paired run isolated it while degraded; a collateral isolation
  counts only if the paired run has none of that agent by then.

Routing-lie counts (tasks that reached a liar, tasks it dropped) are the liar's
own doing by construction and are not paired. The observed counts stay in the
summary beside the attributed ones (``*_observed``, ``background_isolated_at``).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import networkx as nx

from ..core.names import node_order
from .aggregate import frac, mean_of
from .detection import first_isolation
from ..scenario.events import AddAgent, AddLink, Frame, Shield
from ..scenario.model import Scenario, agent_abilities, profile_of

__all__ = ["BYZANTINE_EVENTS", "without_liars", "review_reach", "reach_warnings", "attribute"]

#: the scenario events that make agents lie (events.py's Byzantine MeshHeal events)
BYZANTINE_EVENTS = frozenset({"frame", "shield", "poison", "route_lie", "honest"})

#: events whose liars act only through the reviews they give their targets
_REVIEW_ATTACKS = (Frame, Shield)


def without_liars(sc: Scenario) -> Scenario:
    """The paired scenario: the same file and seed without its Byzantine events."""
    return sc.model_copy(update={"events": [e for e in sc.events if e.type not in BYZANTINE_EVENTS]})


def review_reach(sc: Scenario, G: nx.Graph) -> Callable[[str, str], bool]:
    """``can(j, t)``: may agent j ever review an output of agent t? Linked at some point of the run
    (the initial graph, ``add_link`` and ``add_agent`` links) and some ability in common (a
    reviewer holds every ability of the output, and an output has at least one of t's)."""
    abilities, _targets = agent_abilities(sc, G)
    ab = {a: frozenset(ks) for a, ks in abilities.items()}
    edges = {frozenset(e) for e in G.edges}
    for e in sc.events:
        if isinstance(e, AddLink):
            edges.add(frozenset(e.link))
        elif isinstance(e, AddAgent):
            ab[e.agent] = frozenset(e.abilities)
            edges.update(frozenset((e.agent, b)) for b in e.links)

    def can(j: str, t: str) -> bool:
        return j != t and frozenset((j, t)) in edges and bool(ab.get(j, frozenset()) & ab.get(t, frozenset()))

    return can


def _candidates(e: Any, G: nx.Graph, targets: Optional[list[str]], acted_on: list[str]) -> tuple[list[str], bool]:
    """The agents an event may turn into liars, and whether it names them (else it draws)."""
    if isinstance(e.agents, list):
        return list(e.agents), True
    if isinstance(e.agents, str):  # 'targets'
        return list(targets or []), True
    pool = list(G.neighbors(e.near)) if e.near is not None else list(G.nodes)
    return sorted((a for a in pool if a not in acted_on), key=node_order), False


def reach_warnings(sc: Scenario, G: nx.Graph) -> list[str]:
    """One line per frame / shield event with a liar that can never review a target of it."""
    if sc.protocol.name != "meshheal":
        return []
    can = review_reach(sc, G)
    prof_targets = None
    if profile_of(sc) is not None:
        _ab, prof_targets = agent_abilities(sc, G)
    out = []
    for i, e in enumerate(sc.events):
        if not isinstance(e, _REVIEW_ATTACKS):
            continue
        acted_on = e._targets(prof_targets)
        liars, named = _candidates(e, G, prof_targets, acted_on)
        for t in acted_on:
            bad = [j for j in liars if not can(j, t)]
            if not bad:
                continue
            who = ", ".join(bad)
            if named:
                rest = [j for j in liars if j not in bad]
                tail = (f"only {', '.join(rest)} can" if rest else f"this {e.type} of {t} counts 0")
                out.append(f"events[{i}] ({e.type}): {who} can never review {t} (never linked to it, or no "
                           f"ability in common): {tail}")
            else:
                out.append(f"events[{i}] ({e.type}): {who}, among the agents it draws from, can never review {t} "
                           f"(never linked to it, or no ability in common): such a draw counts 0 for {t}")
    return out


def attribute(adv: dict[str, Any], paired_states: list[dict], can: Callable[[str, str], bool]) -> dict[str, Any]:
    """``adv`` (an ``adversarial`` summary) with framing, shielding and collateral counts limited
    to what the attack caused, against ``paired_states`` (the paired run's ``states`` rows)."""
    out = dict(adv)
    out["paired"] = True
    fr = adv.get("framing")
    if fr is not None:
        f0 = fr["from_task"]
        rows = {}
        for t, r in fr["agents"].items():
            c = r["isolated_at"]
            reach = any(can(j, t) for j in r.get("by", ()))
            bg = first_isolation(paired_states, t, f0, degraded=False)
            caused = reach and c is not None and (bg is None or bg > c)
            rows[t] = dict(r, reachable=reach, background_isolated_at=bg, caused=caused)
        k = sum(1 for r in rows.values() if r["caused"])
        out["framing"] = dict(fr, framed_isolated=k, framed_isolated_share=frac(k, len(rows)),
                              any_isolated=float(k > 0), framed_isolated_observed=fr["framed_isolated"],
                              delay_mean=mean_of([r["delay"] for r in rows.values() if r["caused"]]),
                              unreachable=[t for t, r in rows.items() if not r["reachable"]], agents=rows)
    sh = adv.get("shielding")
    if sh is not None:
        rows = {}
        for t, r in sh["agents"].items():
            reach = any(can(j, t) for j in r.get("by", ()))
            bg = first_isolation(paired_states, t, r["degraded_from"], degraded=True)
            caused = reach and r["isolated_at"] is None and bg is not None
            rows[t] = dict(r, reachable=reach, background_isolated_at=bg, caused=caused)
        k = sum(1 for r in rows.values() if r["caused"])
        n = len(rows)
        out["shielding"] = dict(sh, shielded_not_isolated=k, shielded_share=frac(k, n),
                                any_shielded=float(k > 0) if n else None, all_shielded=float(k == n) if n else None,
                                shielded_not_isolated_observed=sh["shielded_not_isolated"],
                                unreachable=[t for t, r in rows.items() if not r["reachable"]], agents=rows)
    if "collateral_at" in adv:
        first = adv["first_attack_task"]
        caused = {}
        for a, c in adv["collateral_at"].items():
            bg = first_isolation(paired_states, a, first, degraded=False)
            if bg is None or bg > c:
                caused[a] = c
        out["collateral_isolated_observed"] = adv["collateral_isolated"]
        out["collateral_isolated"] = len(caused)
        out["collateral_agents"] = list(caused)
    return out
