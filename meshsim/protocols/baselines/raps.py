"""RAPS (Li et al. 2026, arXiv 2602.08009) on the shared execution layer.

RAPS is a reputation-aware publish-subscribe paradigm: LLM agents "exchange
messages based on their declared intents rather than predefined topologies"
(abstract): a subtask needing ability s reaches the agents that subscribed to
s. Two overlays: "(i) Reactive Subscription, enabling agents to dynamically
refine their intents; and (ii) Bayesian Reputation, empowering each agent
with a local watchdog to detect and isolate malicious peers" (abstract).

**Sources.** Only the abstract and introduction of arXiv 2602.08009v1 (its
HTML page) and third-party summaries (argminai, sciencestack) were found; the
method section — the exact reputation update, the isolation threshold and how
Reactive Subscription refines an intent — is in none of our sources, and no
code repository was found. Everything below beyond the abstract's words is an
assumption, named as such:

* **Bayesian Reputation** (assumed to be the Beta reputation system of Jøsang
  & Ismail 2002, the standard Bayesian reputation). Agent i keeps
  Beta(alpha_ij, beta_ij) for every peer j (prior Beta(1, 1), ``prior``); an
  observed success adds one to alpha, a failure one to beta; the reputation
  is the posterior mean alpha / (alpha + beta).
* **Routing prefers high reputation.** Publishing the next needed ability,
  agent i hands the task to the matching subscriber (a neighbour subscribed
  to a missing ability) with the highest reputation, ties at random; no LLM
  call (matching by declared intent).
* **Isolation.** A peer whose reputation is below ``isolate_below`` (0.5:
  judged bad more often than good; assumption, 0.3 and 0.7 in
  ``compare-assumptions``) is blacklisted: i no longer routes to it; it is
  readmitted if its reputation recovers (the watchdog keeps observing it
  whenever it works as an entry agent). The observer records a peer as
  isolated when every agent linked to it has blacklisted it.
* **Reactive Subscription** (``reactive``; off by default because its rule
  is not in our sources). Our reading of "agents dynamically refine their
  intents": a subscription is an agent's intent, refined in reaction to what
  the watchdogs say of its own work. With ``reactive: true`` a watchdog sends
  its verdict to the producer of the output it judged (``verdict``, when the
  producer is a neighbour); the producer keeps a Beta(``prior``) posterior of
  its own success per ability and withdraws its subscription to an ability
  whose posterior mean falls below ``isolate_below``, re-subscribing when it
  recovers (its own work as an entry agent is still judged); it announces its
  subscriptions in a ``hello``. Declared abilities (and so Model-Backed MAS
  Evaluation) do not change: only the work routed to it does.
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

from ...net.messages import HEADER_BYTES
from ..execution import Output, TaskState
from .common import Baseline, BaselineParams, ChainAgent, judge

__all__ = ["RAPS", "RAPSParams", "RAPSAgent"]


class RAPSParams(BaselineParams):
    #: Beta prior (alpha0, beta0) of every peer's reputation (assumption: uniform)
    prior: tuple[Annotated[float, Field(gt=0, le=1e6)], Annotated[float, Field(gt=0, le=1e6)]] = (1.0, 1.0)
    #: blacklist a peer whose posterior mean reputation falls below this (assumption: the prior's mean)
    isolate_below: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5
    #: Reactive Subscription as we read it (a producer withdraws from abilities its verdicts condemn);
    #: off by default: the paper's rule is not in our sources
    reactive: bool = False


class RAPSAgent(ChainAgent):
    method = "raps"

    params: RAPSParams

    def __init__(self, *a: Any, **kw: Any):
        super().__init__(*a, **kw)
        self.ab: dict[str, list[float]] = {}  # peer -> [alpha, beta]
        self.blacklist: set[str] = set()
        self.subscribed: set[str] = set(self.K)  # its intents: the abilities it takes work for
        self.own: dict[str, list[float]] = {}  # ability -> [alpha, beta] of the verdicts on its own work
        self.node.on("verdict", self._on_verdict)

    def _hello(self, peer: str) -> None:
        """Announce the current subscriptions (all declared abilities unless Reactive Subscription
        withdrew some)."""
        self.reliable.send(peer, "hello", {"abilities": sorted(self.subscribed)},
                           size=HEADER_BYTES + 24 * (1 + len(self.subscribed)))

    def _on_verdict(self, msg) -> None:
        """Reactive Subscription (our reading): a watchdog's verdict on this agent's output."""
        ok = bool(msg.payload["success"])
        changed = False
        for s in msg.payload["abilities"]:
            if s not in self.K:
                continue
            ab = self.own.setdefault(s, list(self.params.prior))
            ab[0 if ok else 1] += 1.0
            want = ab[0] / (ab[0] + ab[1]) >= self.params.isolate_below
            if want != (s in self.subscribed):
                (self.subscribed.add if want else self.subscribed.discard)(s)
                changed = True
        if changed:
            self.sink("note", task=msg.payload["task"],
                      note=f"{self.name} subscribes to {','.join(sorted(self.subscribed)) or 'nothing'}")
            self._hello_all()

    def reputation(self, j: str) -> float:
        a, b = self.ab.get(j, self.params.prior)
        return a / (a + b)

    def observe(self, j: str, score: float, task: int, abilities: Any = None) -> None:
        """The watchdog's Bayesian update of peer j from one judged output, then the blacklist check."""
        if j == self.name:
            return
        success = score > self.params.judge_threshold
        self.sink("signal", task=task, by=self.name, about=j, score=score, success=success)
        if self.params.reactive and abilities is not None and j in self.node.links:
            self.node.send(j, "verdict", {"task": task, "abilities": sorted(abilities), "success": success},
                           size=HEADER_BYTES + 16 + 24 * len(abilities))
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
                self.observe(y.agent, score, X.task.index, y.abilities)

    def returns_results(self) -> bool:
        return True

    def on_result(self, X: TaskState, y: Output) -> Generator[Any, Any, None]:
        if y.agent != self.name:
            score = yield from judge(self.llm, X, y, X.Y[:-1])
            self.observe(y.agent, score, X.task.index, y.abilities)
        self.sink("done", task=X.task, state=X, output=y)


class RAPS(Baseline):
    name = "raps"
    Params = RAPSParams
    Agent = RAPSAgent

    def method_summary(self) -> dict[str, Any]:
        return {"reputation": {a: {j: round(ag.reputation(j), 4) for j in sorted(ag.ab)}
                               for a, ag in sorted(self.agents.items())},
                "blacklisted": {a: sorted(ag.blacklist) for a, ag in sorted(self.agents.items()) if ag.blacklist},
                "unsubscribed": {a: sorted(ag.K - ag.subscribed) for a, ag in sorted(self.agents.items())
                                 if ag.K - ag.subscribed}}
