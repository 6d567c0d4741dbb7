"""RAPS (Li et al. 2026, arXiv 2602.08009) on the shared execution layer.

RAPS is a reputation-aware publish-subscribe paradigm: agents exchange work
by declared intent (a subtask needing ability s reaches the agents that
subscribed to s) and each agent runs a **Bayesian Reputation** overlay, "a
local watchdog to detect and isolate malicious peers" (abstract). As modelled
here (the paper's exact update and threshold are not in our sources: the
choices below are assumptions, named as such):

* **Reputation.** Agent i keeps Beta(alpha_ij, beta_ij) for every peer j
  (prior Beta(1, 1), ``prior``); an observed success adds one to alpha, a
  failure one to beta; the reputation is the posterior mean
  alpha / (alpha + beta).
* **Routing prefers high reputation.** Publishing the next needed ability,
  agent i hands the task to the matching subscriber (a neighbour that
  declared a missing ability) with the highest reputation, ties at random; no
  LLM call (matching by declared intent).
* **Isolation.** A peer whose reputation is below ``isolate_below`` (0.5:
  judged bad more often than good) is blacklisted: i no longer routes to it;
  it is readmitted if its reputation recovers (the watchdog keeps observing
  it whenever it works as an entry agent). The observer records a peer as
  isolated when every agent linked to it has blacklisted it.
* **No fast-timescale correction, no probes**: a judged output is never
  replaced; a blacklisted agent is never sent work to test it.

**Observed outcome (the watchdog).** Each agent judges the outputs it
receives and uses, with one App. D.1 rubric call (:func:`.common.judge`;
success iff the score is above ``judge_threshold`` = 0.40): the agent that
finalizes judges each draft from another agent before combining it, and the
entry agent (the task's publisher) judges the final answer returned to it.
Judges use the model Model-Backed MAS Evaluation assigns for the judged
output's abilities: a consumer seldom holds the ability of what it consumes
(the task's two abilities are held by disjoint agents), so most judgments
are made with the weak model.
"""
from __future__ import annotations

from typing import Annotated, Any, Generator

from pydantic import Field

from ..execution import Output, TaskState
from .common import Baseline, BaselineParams, ChainAgent, judge

__all__ = ["RAPS", "RAPSParams", "RAPSAgent"]


class RAPSParams(BaselineParams):
    #: Beta prior (alpha0, beta0) of every peer's reputation (assumption: uniform)
    prior: tuple[Annotated[float, Field(gt=0, le=1e6)], Annotated[float, Field(gt=0, le=1e6)]] = (1.0, 1.0)
    #: blacklist a peer whose posterior mean reputation falls below this (assumption: the prior's mean)
    isolate_below: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5


class RAPSAgent(ChainAgent):
    method = "raps"

    def __init__(self, *a: Any, **kw: Any):
        super().__init__(*a, **kw)
        self.ab: dict[str, list[float]] = {}  # peer -> [alpha, beta]
        self.blacklist: set[str] = set()

    def reputation(self, j: str) -> float:
        a, b = self.ab.get(j, self.params.prior)
        return a / (a + b)

    def observe(self, j: str, score: float, task: int) -> None:
        """The watchdog's Bayesian update of peer j from one judged output, then the blacklist check."""
        if j == self.name:
            return
        success = score > self.params.judge_threshold
        self.sink("signal", task=task, by=self.name, about=j, score=score, success=success)
        ab = self.ab.setdefault(j, list(self.params.prior))
        ab[0 if success else 1] += 1.0
        bad = self.reputation(j) < self.params.isolate_below
        if bad and j not in self.blacklist:
            self.blacklist.add(j)
            self.sink("exclude", by=self.name, peer=j, excluded=True, task=task)
        elif not bad and j in self.blacklist:
            self.blacklist.discard(j)
            self.sink("exclude", by=self.name, peer=j, excluded=False, task=task)

    # -- publish / subscribe routing ------------------------------------------------
    def choose_next(self, X: TaskState, M: list[str]) -> Generator[Any, Any, list[str]]:
        live = [j for j in self.neighbours() if j not in self.blacklist]
        subs = self.holders(M, live)
        pool = subs or [j for j in live if j not in X.visits] or live
        keys = {j: (-self.reputation(j), self.rnd.random()) for j in pool}
        return sorted(pool, key=lambda j: keys[j])
        yield

    # -- the watchdog ------------------------------------------------------------------
    def before_output(self, X: TaskState, H: frozenset, action: str) -> Generator[Any, Any, None]:
        if action != "finalize":
            return
        for k, y in enumerate(X.Y):
            if y.agent != self.name:
                score = yield from judge(self.llm, X, y, X.Y[:k])
                self.observe(y.agent, score, X.task.index)

    def returns_results(self) -> bool:
        return True

    def on_result(self, X: TaskState, y: Output) -> Generator[Any, Any, None]:
        if y.agent != self.name:
            score = yield from judge(self.llm, X, y, X.Y[:-1])
            self.observe(y.agent, score, X.task.index)
        self.sink("done", task=X.task, state=X, output=y)


class RAPS(Baseline):
    name = "raps"
    Params = RAPSParams
    Agent = RAPSAgent

    def method_summary(self) -> dict[str, Any]:
        return {"reputation": {a: {j: round(ag.reputation(j), 4) for j in sorted(ag.ab)}
                               for a, ag in sorted(self.agents.items())},
                "blacklisted": {a: sorted(ag.blacklist) for a, ag in sorted(self.agents.items()) if ag.blacklist}}
