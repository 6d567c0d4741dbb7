"""Self-Anchored Consensus (SAC; papers/sac-2605.09076.md Sec. 4.1, Alg. 1, App. B).

Per query every agent i answers (``sac_answer``) and scores itself
(s_{i->i} = phi_i(x, r_i), a ``sac_score`` call). Then, for T rounds:

1. broadcast r_i^(t) to the neighbours (one ``sac`` message each);
2. collect neighbours' answers until the round deadline (lost or late ones
   are simply absent);
3. score every received answer *receiver side*: s_{i->j} = phi_i(x, r_j)
   (Eq. 1; a reply without a number scores ``parse_default`` = 0.5);
4. L = received neighbours scored strictly below s_{i->i} (Eq. 2); drop the
   min(F, |L|) lowest of L (Eq. 3): the retained set R;
5. refine on the own answer and R sorted by score, highest first
   (``sac_refine``, Eq. 4); R empty or no extractable answer: keep r_i;
6. re-score the own answer.

The shared round loop, message handling and Byzantine behaviours are in
:mod:`.consensus`; this module holds the honest update.
"""
from __future__ import annotations

from typing import Any

from ..core.calls import CallKind, TaskInfo
from ..core.names import node_order
from .consensus import (ConsensusAgent, ConsensusParams, ConsensusProtocol, parse_answer, parse_score, refine_shown,
                        sac_filter)

__all__ = ["SAC", "SACParams", "SACAgent"]


class SACParams(ConsensusParams):
    """SAC parameters (defaults: SAC Sec. 5.1-5.2: F = 3, T = 6)."""


class SACAgent(ConsensusAgent):
    msg_kind = "sac"

    def _update(self, task: TaskInfo, t: int, got: dict[str, dict]):
        senders = sorted(got, key=node_order)
        extra: dict[str, Any] = {"received": len(senders)}
        if not senders:  # R empty: the refinement step is skipped (App. B.2)
            extra.update(scores={}, retained=[], dropped=[], note="nothing_received")
            return extra
        reqs = self._score_requests(task, [got[j] for j in senders])
        resps = yield from self.llm.call_many(reqs)
        scores: dict[str, float] = {}
        unparsed = 0
        for j, r in zip(senders, resps):
            s = parse_score(r)
            if s is None:
                unparsed += 1
                s = self.params.parse_default
            scores[j] = s
        tiebreak = {j: self.rnd.random() for j in senders}
        assert self.score is not None  # rescored before the round's send (_before_send)
        retained, dropped = sac_filter(self.score, scores, self.params.F, tiebreak)
        extra.update(scores=scores, retained=retained, dropped=dropped)
        if unparsed:
            extra["note"] = f"score_unparsable:{unparsed}"
        if not retained:
            extra["note"] = "retained_empty"
            return extra
        # what the refine prompt shows (App. B.2): the current answer (without its
        # self-score) and the retained answers with the scores this agent gave them
        ctx = {"own": {"answer": self.answer, "text": self.text},
               "retained": refine_shown(retained, got, scores),
               "context_items": len(retained) + 1}
        resp = yield from self.llm.call(self.llm.request(CallKind.SAC_REFINE, task, (), ctx))
        new = parse_answer(resp)
        if new is None:
            extra["note"] = "refine_unparsable"  # keep the current answer (App. B.2)
        else:
            self._set_response(resp, new)
        yield from self._rescore(task)
        return extra


class SAC(ConsensusProtocol):
    name = "sac"
    Params = SACParams
    Agent = SACAgent
