"""CP-WBFT baseline as the SAC paper describes it (Sec. 1-2, 5.2, App. B.4).

CP-WBFT (Zheng et al. 2026) aggregates neighbours' answers weighted by the
confidence each *sender* reports about its own answer. Per query every agent
answers and measures its confidence in its own answer (a self-evaluation,
the same ``sac_score`` call SAC uses for s_{i->i}); then, for T rounds:

1. broadcast (answer, confidence) to the neighbours (one ``cpwbft`` message
   each); Byzantine agents report ``adversary_confidence`` (1.0, App. B.4);
2. collect until the round deadline;
3. aggregate: with ``aggregation: llm`` (default) the agent's model is shown
   its own answer and every received answer with its reported confidence and
   asked for an updated answer (``cpwbft_aggregate``); with ``aggregation:
   vote`` the answer with the largest confidence sum (own included) wins;
4. re-measure the own confidence.

Nothing is filtered and no received answer is evaluated by the receiver:
that is the vulnerability SAC removes (receiver-side scores).
"""
from __future__ import annotations

import math
from typing import Any, Literal, Optional

from ..backends.base import TaskRef
from ..names import node_order
from .consensus import (ADVERSARIAL_ROLES, CPWBFT_AGGREGATE, ConsensusAgent, ConsensusParams, ConsensusProtocol,
                        parse_answer)

__all__ = ["CPWBFT", "CPWBFTParams", "CPWBFTAgent"]


class CPWBFTParams(ConsensusParams):
    aggregation: Literal["llm", "vote"] = "llm"


def _conf(v: Any) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return min(1.0, max(0.0, float(v)))
    return 0.0


class CPWBFTAgent(ConsensusAgent):
    msg_kind = "cpwbft"

    def _payload(self, t: int, answer: Optional[str], text: str) -> dict:
        p = super()._payload(t, answer, text)
        if self.role in ADVERSARIAL_ROLES:
            p["conf"] = self.params.adversary_confidence  # falsified self-confidence
        else:
            p["conf"] = self.score if self.score is not None else self.params.parse_default
        return p

    def _update(self, task: TaskRef, t: int, got: dict[str, dict]):
        senders = sorted(got, key=node_order)
        peers = [{"answer": got[j].get("answer"), "text": got[j].get("text", ""),
                  "confidence": _conf(got[j].get("conf"))} for j in senders]
        extra: dict[str, Any] = {"received": len(senders),
                                 "scores": {j: p["confidence"] for j, p in zip(senders, peers)}}
        if not peers:
            extra["note"] = "nothing_received"
            return extra
        own = {"answer": self.answer, "text": self.text, "confidence": self.score}
        if self.params.aggregation == "vote":
            new = self._vote(own, peers)
            if new != self.answer:
                j = next(i for i, p in enumerate(peers) if p["answer"] == new)
                self.answer, self.text = new, peers[j]["text"]
        else:
            ctx = {"own": own, "peers": peers, "context_items": len(peers) + 1}
            resp = yield from self.llm.call(self.llm.request(CPWBFT_AGGREGATE, task, (), ctx))
            new = parse_answer(resp)
            if new is None:
                extra["note"] = "aggregate_unparsable"
            else:
                self._set_response(resp, new)
        yield from self._rescore(task)
        return extra

    def _vote(self, own: dict, peers: list[dict]) -> Optional[str]:
        weight: dict[str, float] = {}
        if own["answer"] is not None:
            weight[own["answer"]] = _conf(own["confidence"])
        for p in peers:
            if p["answer"] is not None:
                weight[p["answer"]] = weight.get(p["answer"], 0.0) + p["confidence"]
        if not weight:
            return own["answer"]
        top = max(weight.values())
        best = sorted(a for a, w in weight.items() if w == top)
        if own["answer"] in best:
            return own["answer"]
        return best[self.rnd.randrange(len(best))]


class CPWBFT(ConsensusProtocol):
    name = "cpwbft"
    Params = CPWBFTParams
    Agent = CPWBFTAgent
