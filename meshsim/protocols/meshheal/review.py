"""MeshHeal's fast timescale: review, committee and Takeover (Sec. 4.2.1, Alg. 2, App. B.5).

Producer side (``Assess``, run by the producing agent's controller) and
reviewer side (``serve``, run by each reviewer's controller when a review
request arrives over the link). Everything crosses links as messages:
``review_req`` / ``review_rep`` for the initial three calls, both committee
rounds (round 2 carries the exchanged round-1 scores and explanations),
Takeover candidates and the synthesis.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Generator, Optional, Protocol, cast

from ...core.calldata import rebuilt
from ...core.sim import randbelow
from ...core.calls import CallKind
from ...core.types import RoutingState
from ..execution import Output, TaskState


class MeshHealAgent(Protocol):
    """What the review code needs of a controller (agent.MeshHealAgent is one):
    its own state, parameters, model and random stream, and its messaging."""

    name: str
    params: Any
    rnd: Any
    llm: Any
    K_orig: frozenset
    K_sorted: tuple
    peer_state: dict

    @property
    def state(self) -> RoutingState: ...

    def eligible_reviewers(self, H: frozenset) -> list[str]: ...

    def ask(self, reviewer: str, req: dict, y: Output, H: frozenset,
            X: TaskState) -> Generator[Any, Any, Optional[dict]]: ...

    def ask_all(self, reviewers: list[str], reqs: list[dict], y: Output, H: frozenset,
                X: TaskState) -> Generator[Any, Any, list[Optional[dict]]]: ...

    def sink_record(self, kind: str, task_index: int, agent: str) -> None: ...

NORMAL = RoutingState.NORMAL

__all__ = ["Assessment", "assess", "serve_review", "median3", "sample_sd"]


def median3(scores: list[float]) -> float:
    """q0: median of the initial scores (Alg. 2, line 3)."""
    xs = sorted(scores)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2.0


def sample_sd(scores: list[float]) -> float:
    """s_u: sample standard deviation of the initial scores (App. B.5).

    Plain floats: ``statistics.stdev`` computes with exact fractions, ~50x slower.
    """
    n = len(scores)
    if n < 2:
        return 0.0
    mean = sum(scores) / n
    return math.sqrt(sum((x - mean) ** 2 for x in scores) / (n - 1))


@dataclass
class Assessment:
    """Outcome of Assess(i, y, H, h_i, b_probe, X) for one output."""

    q: Optional[float]  # final score attributed to the producer (None: no reviewer reachable)
    output: Output  # accepted output or the Takeover synthesis
    q0: Optional[float] = None
    s_u: Optional[float] = None
    initial: list[float] = field(default_factory=list)
    committee: bool = False
    trigger: list[str] = field(default_factory=list)
    round1: list[float] = field(default_factory=list)
    round2: list[float] = field(default_factory=list)
    reviewers: list[str] = field(default_factory=list)
    takeover: bool = False
    same_reviewer_twice: bool = False
    reviewer_views: dict = field(default_factory=dict)  # the producer's view of each reviewer's state

    def __init__(self, q: Optional[float], output: Output, q0: Optional[float] = None, s_u: Optional[float] = None,
                 initial: Optional[list[float]] = None, committee: bool = False, trigger: Optional[list[str]] = None,
                 round1: Optional[list[float]] = None, round2: Optional[list[float]] = None,
                 reviewers: Optional[list[str]] = None, takeover: bool = False, same_reviewer_twice: bool = False,
                 reviewer_views: Optional[dict] = None) -> None:
        # written out: compiled, it is native; the one dataclasses generates runs interpreted (docs/scaling.md)
        self.q = q
        self.output = output
        self.q0 = q0
        self.s_u = s_u
        self.initial = [] if initial is None else initial
        self.committee = committee
        self.trigger = [] if trigger is None else trigger
        self.round1 = [] if round1 is None else round1
        self.round2 = [] if round2 is None else round2
        self.reviewers = [] if reviewers is None else reviewers
        self.takeover = takeover
        self.same_reviewer_twice = same_reviewer_twice
        self.reviewer_views = {} if reviewer_views is None else reviewer_views

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuilt(self)


def committee_triggers(q0: float, s_u: float, watched: bool, probe: bool, tau: float, sigma: float) -> list[str]:
    """Why committee review is needed (Alg. 2, line 4); empty -> accept on q0."""
    why = []
    if q0 <= tau:
        why.append("low_score")
    if s_u >= sigma:
        why.append("disagreement")
    if watched:
        why.append("watched")
    if probe:
        why.append("probe")
    return why


def assess(agent: MeshHealAgent, y: Output, H: frozenset, X: TaskState,
           probe: bool) -> Generator[Any, Any, Assessment]:
    """Alg. 2 at the producer's controller."""
    p = agent.params
    eligible = agent.eligible_reviewers(H)
    if not eligible:
        agent.sink_record("unreviewed", X.task.index, agent.name)
        return Assessment(q=None, output=y)
    rnd = agent.rnd
    views = {j: agent.peer_state[j].value for j in eligible}
    # Initial review: one eligible normal neighbour, three independent calls.
    initial: Optional[list[float]] = None
    reviewer = None
    candidates = list(eligible)
    while candidates and initial is None:
        reviewer = candidates.pop(randbelow(rnd, len(candidates)))
        # ask_all, not ask: a generator level less (the same request and wait)
        (rep,) = yield from agent.ask_all([reviewer], [{"mode": "initial", "n": p.review_calls}], y, H, X)
        if rep is not None:
            initial = rep["scores"]
    if initial is None:
        agent.sink_record("unreviewed", X.task.index, agent.name)
        return Assessment(q=None, output=y)
    assert reviewer is not None  # the one whose scores are initial
    q0 = median3(initial)
    s_u = sample_sd(initial)
    res = Assessment(q=q0, output=y, q0=q0, s_u=s_u, initial=list(initial), reviewers=[reviewer],
                     reviewer_views={reviewer: views[reviewer]})
    if not p.committee:
        # Single-reviewer ablation (Sec. 6.4): the initial peer judges and corrects alone.
        if q0 <= p.tau_to and p.takeover:
            res.takeover = True
            res.output = yield from _takeover(agent, [reviewer], y, H, X, single=True)
        return res
    why = committee_triggers(q0, s_u, agent.state is RoutingState.WATCHED, probe, p.tau_to, p.sigma_com)
    if not why:
        return res
    res.committee = True
    res.trigger = why
    # Two distinct eligible reviewers when possible, else one reviewer in two contexts.
    pool = list(eligible)
    if len(pool) >= 2:
        a = pool.pop(randbelow(rnd, len(pool)))
        b = pool.pop(randbelow(rnd, len(pool)))
        members = [a, b]
    else:
        members = [pool[0], pool[0]]
        res.same_reviewer_twice = True
    r1 = yield from agent.ask_all(members, [{"mode": "r1", "ctx": "A"}, {"mode": "r1", "ctx": "B"}], y, H, X)
    if any(r is None for r in r1):
        # A committee member became unreachable: fall back to the initial decision.
        return res
    got1 = cast(list[dict], r1)  # (none is None: checked above)
    v1 = [r["score"] for r in got1]
    expl = [r.get("explanation", "") for r in got1]
    r2 = yield from agent.ask_all(
        members,
        [{"mode": "r2", "ctx": "A", "own": v1[0], "other": v1[1], "explanations": expl},
         {"mode": "r2", "ctx": "B", "own": v1[1], "other": v1[0], "explanations": expl[::-1]}], y, H, X)
    if any(r is None for r in r2):
        return res
    v2 = [r["score"] for r in cast(list[dict], r2)]  # (none is None: checked above)
    q = (v2[0] + v2[1]) / 2.0  # Alg. 2, line 7
    res.q = q
    res.round1, res.round2 = v1, v2
    res.reviewers = [reviewer] + members
    res.reviewer_views = {j: views[j] for j in res.reviewers}
    if q <= p.tau_to and p.takeover:  # Alg. 2, lines 8-10
        res.takeover = True
        res.output = yield from _takeover(agent, members, y, H, X)
    return res


def _takeover(agent: MeshHealAgent, members: list[str], y: Output, H: frozenset, X: TaskState,
              single: bool = False) -> Generator[Any, Any, Output]:
    """Takeover: the reviewers write correction candidates; a normal committee
    reviewer synthesizes them (Mixture-of-Agents); the synthesis replaces y
    and is not reviewed again (App. B.5)."""
    if single:
        members = [members[0], members[0]]
    cands = yield from agent.ask_all(members, [{"mode": "candidate", "ctx": "A"},
                                               {"mode": "candidate", "ctx": "B"}], y, H, X)
    got = [c for c in cands if c is not None]
    if not got:
        return y
    synth = yield from agent.ask(members[0], {"mode": "synthesis",
                                               "candidates": [c.get("text", "") for c in got]}, y, H, X)
    if synth is None:
        return y
    return y.replaced(by=members[0], text=synth.get("text", ""))


def serve_review(agent: MeshHealAgent, req: dict) -> Generator[Any, Any, dict]:
    """Reviewer side: run the LLM calls a review request asks for, return the reply."""
    mode = req["mode"]
    task = req["task"]
    H = tuple(sorted(req["abilities"]))
    ctx = {"action": req["action"], "context_items": req["context_items"], "output_text": req.get("output_text", ""),
           "drafts": req.get("drafts", []), "producer": req.get("producer"),
           "reviewer_abilities": list(agent.K_sorted)}
    llm = agent.llm
    if mode == "initial":
        reqs = [llm.request(CallKind.REVIEW, task, H, ctx, sample=k) for k in range(req["n"])]
        resps = yield from llm.call_many(reqs)
        return {"scores": [_score(r) for r in resps]}
    if mode == "r1":
        r = yield from llm.call(llm.request(CallKind.COMMITTEE, task, H, dict(ctx, round=1, label=req["ctx"])))
        return {"score": _score(r), "explanation": r.text}
    if mode == "r2":
        expl = req.get("explanations") or ["", ""]
        r = yield from llm.call(llm.request(CallKind.COMMITTEE, task, H,
                                            dict(ctx, round=2, own=req["own"], other=req["other"],
                                                 label=req["ctx"], explanations=expl,
                                                 own_explanation=expl[0], other_explanation=expl[1])))
        return {"score": _score(r)}
    if mode == "candidate":
        r = yield from llm.call(llm.request(CallKind.TAKEOVER_CANDIDATE, task, H, dict(ctx, label=req["ctx"])))
        return {"text": (r.text or "") if r.error is None else ""}
    if mode == "synthesis":
        r = yield from llm.call(llm.request(CallKind.SYNTHESIS, task, H,
                                            dict(ctx, candidates=list(req.get("candidates", [])))))
        return {"text": (r.text or "") if r.error is None else ""}
    raise ValueError(f"unknown review mode {mode!r}")


def _score(resp) -> float:
    """A reply's score; an unparsable review counts as a neutral 0.5 (App. D.1 anchors)."""
    if resp.error is not None:
        return 0.5
    s = resp.fields.get("score")
    try:
        s = float(s)
    except (TypeError, ValueError):
        return 0.5
    return min(1.0, max(0.0, s))
