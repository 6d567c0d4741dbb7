"""CP-WBFT baseline as the SAC authors run it (papers/sac-2605.09076.md Sec. 1-2,
5.2, App. B.4; github daniel-eai/Robust-Multi-Agent-LLMs-under-Byzantine-Faults
at 2fa2da0, ``prompt_probe`` method in confidence mode).

CP-WBFT (Zheng et al. 2026) aggregates answers by the confidence each *sender*
reports about its own answer. Per query every honest agent solves the query
and states a verbal confidence in the same reply (``cpwbft_answer``; no
"Confidence:" line reads as ``missing_confidence``, 0.0 in the authors'
parser). Then each exchange round:

1. broadcast (answer, confidence) to the neighbours (one ``cpwbft`` message
   each); Byzantine agents report ``adversary_confidence`` (1.0, App. B.4);
2. collect until the round deadline;
3. aggregate (``aggregation``):

   * ``mean`` (default, the authors' arithmetic, no LLM call): the received
     (answer, confidence) pairs in arrival order, then the agent's own, are
     grouped by exact answer string; each answer scores the *mean* of its
     confidences; the agent takes the answer with the largest (mean, count),
     a remaining tie going to the answer met first; its new confidence is
     that mean. There is no threshold at this level
     (core/agents/llm_agent.py, participate_in_consensus);
   * ``llm``: the agent's model is shown its own answer and confidence and
     every received answer with its reported confidence and writes a new
     answer and confidence (``cpwbft_aggregate``): how an LLM treats
     confidence claims is then the fake's ``aggregate`` assumption.

Rounds (``rounds_mode``):

* ``authors`` (default): one exchange-and-aggregate round, then the run
  stops -- the authors' engine declares convergence after the first round at
  its default threshold, and their Tab. 2/4 pad CP-WBFT's rounds 1-6 with
  that round. Rounds 2..T repeat the answers (no messages, no calls);
* ``resolve``: the authors' loop without the early stop: each round every
  honest agent solves afresh (new answer and confidence) and aggregates once;
* ``iterate``: classic iterated aggregation: agents carry their aggregated
  answer and confidence into the next round.

Nothing is filtered and no received answer is evaluated by the receiver:
that is the vulnerability SAC removes (receiver-side scores). The global
decision of the authors' engine (:func:`meshsim.observe.consensus.engine_decision`, the 0.5 threshold)
is what their RA reports for CP-WBFT; the metrics compute it as
``ra_authors`` beside the paper's RA (docs/sac.md).
"""
from __future__ import annotations

import math
from typing import Annotated, Any, Iterable, Literal, Optional

from pydantic import Field

from ..core.calls import TaskInfo
from .consensus import (ADVERSARIAL_ROLES, CPWBFT_AGGREGATE, CPWBFT_ANSWER, ConsensusAgent,
                        ConsensusParams, ConsensusProtocol, parse_answer)

__all__ = ["CPWBFT", "CPWBFTParams", "CPWBFTAgent", "mean_confidence_choice"]

_Prob = Annotated[float, Field(ge=0.0, le=1.0)]


class CPWBFTParams(ConsensusParams):
    aggregation: Literal["mean", "llm"] = "mean"
    rounds_mode: Literal["authors", "resolve", "iterate"] = "authors"
    #: confidence of a reply without a "Confidence:" line (the authors' parser: 0.0)
    missing_confidence: _Prob = 0.0


def _conf(v: Any, default: float = 0.0) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return min(1.0, max(0.0, float(v)))
    return default


def mean_confidence_choice(entries: Iterable[tuple[Optional[str], float]]) -> tuple[Optional[str], float]:
    """The authors' per-agent aggregation: ``entries`` are (answer, confidence)
    in order (received ones in arrival order, the agent's own last). Answers
    are grouped by exact string; the one with the largest (mean confidence,
    count) wins, ties going to the answer met first. Returns (answer, mean)."""
    groups: dict[Optional[str], list[float]] = {}
    for a, c in entries:
        groups.setdefault(a, []).append(c)
    if not groups:
        return None, 0.0
    best, key = None, None
    for a, cs in groups.items():
        k = (sum(cs) / len(cs), len(cs))
        if key is None or k > key:  # strictly better: the first of equals stays
            best, key = a, k
    assert key is not None  # groups is not empty
    return best, key[0]


class CPWBFTAgent(ConsensusAgent):
    msg_kind = "cpwbft"
    params: CPWBFTParams

    # -- what the agent reports ---------------------------------------------------
    def _reported(self) -> float:
        if self.role in ADVERSARIAL_ROLES:
            return self.params.adversary_confidence  # falsified self-confidence
        return self.score if self.score is not None else self.params.missing_confidence

    def _payload(self, t: int, answer: Optional[str], text: str) -> dict:
        p = super()._payload(t, answer, text)
        p["conf"] = self._reported()
        return p

    def _record_extra(self) -> dict:
        return {"conf": self._reported()}

    # -- the honest steps -----------------------------------------------------------
    def _initial(self, task: TaskInfo):
        """Solve and state a confidence in one reply (the authors' solve prompt)."""
        resp = yield from self._solve(CPWBFT_ANSWER, task)
        self.score = _conf((resp.fields or {}).get("confidence"), self.params.missing_confidence)

    def _rescore(self, task: TaskInfo):
        # back from a Byzantine spell: no confidence of its own yet, so solve again
        yield from self._initial(task)

    def _exchanges(self, t: int) -> bool:
        return self.params.rounds_mode != "authors" or t == 0

    def _before_send(self, task: TaskInfo, t: int):
        if self.score is None or (self.params.rounds_mode == "resolve" and t > 0):
            yield from self._initial(task)

    def _update(self, task: TaskInfo, t: int, got: dict[str, dict]):
        senders = list(got)  # arrival order: the order ties are settled in
        peers = [{"answer": got[j].get("answer"), "text": got[j].get("text", ""),
                  "confidence": _conf(got[j].get("conf"))} for j in senders]
        extra: dict[str, Any] = {"received": len(senders),
                                 "scores": {j: p["confidence"] for j, p in zip(senders, peers)}}
        if not peers:
            extra["note"] = "nothing_received"
            return extra
        own_c = self._reported()
        if self.params.aggregation == "mean":
            new, conf = mean_confidence_choice([(p["answer"], p["confidence"]) for p in peers]
                                               + [(self.answer, own_c)])
            if new != self.answer:
                j = next(i for i, p in enumerate(peers) if p["answer"] == new)
                self.answer, self.text = new, peers[j]["text"]
            self.score = conf
        else:
            ctx = {"own": {"answer": self.answer, "text": self.text, "confidence": own_c}, "peers": peers,
                   "context_items": len(peers) + 1}
            resp = yield from self.llm.call(self.llm.request(CPWBFT_AGGREGATE, task, (), ctx))
            new = parse_answer(resp)
            if new is None:
                extra["note"] = "aggregate_unparsable"  # keeps answer and confidence
            else:
                self._set_response(resp, new)
                self.score = _conf((resp.fields or {}).get("confidence"), self.params.missing_confidence)
        return extra


class CPWBFT(ConsensusProtocol):
    name = "cpwbft"
    Params = CPWBFTParams
    Agent = CPWBFTAgent

