"""AgentNet (Yang et al. 2025, NeurIPS; public code ``zoe-yyx/AgentNet``) on the shared execution layer.

Decentralized routing by learned edge weights, as in the authors' code:

* every agent's **router** decides where a task goes next with an LLM call
  (``Agent.router_decide_action`` / ``router_decide_next_agent_id`` in
  ``AgentNet_Code/src/agent.py``): its prompt lists the neighbours it still
  routes to, with their declared abilities, excluding agents already on the
  task's forward history (``router_make_prompt``: ``task.in_forward_history``);
  here one ``select`` call (:mod:`meshsim.backends.fake`); an unusable reply
  falls back to a neighbour holding a needed ability
  (``find_best_alternative_agent``), else a random neighbour;
* after the task, every router decision on its path updates the edge it
  used (``AgentGraph.update_edge_weight`` in ``AgentNet_Code/src/agentgraph.py``):
  ``w <- clip(w x 1.1 on success or x 0.9 on failure, 0.1, 2.0)``; an edge
  whose weight falls to 0.3 or below is deleted from the router's neighbour
  list for good (``outcoming_agent_id.remove``) and no longer shown to it
  (``collect_neighbors_info``: ``edge_weight <= 0.3 -> continue``). The
  code's ``time_factor = min(1, 1/(0.1 x execution_time))`` is 1 for router
  calls under 10 s, as every simulated call here is; it is left out.
* no review, no detector, no probes.

**Observed outcome.** The authors' ``Experiment.update_agent_graph`` takes
``success`` from ``evaluate_answer`` against the gold answer (their training
phase; their test phase does not update at all). A deployed network has no
gold answer, so here the outcome of a task is what its **entry agent**
observes: the final answer comes back to it and it judges it with one
App. D.1 rubric call (:func:`.common.judge`; success iff the score is above
``judge_threshold`` = 0.40). The judge's model follows Model-Backed MAS
Evaluation for the final output's abilities, so an entry agent that does not
hold them judges with the weak model: the signal is as noisy as the network
makes it. The entry then sends the outcome (``feedback``) to every router on
the path. AgentNet never readmits a pruned edge: a pruned agent is isolated
for good once every neighbour has pruned it (reintegration undefined).
"""
from __future__ import annotations

from typing import Any, Generator

from ...backends.base import CallKind
from ...net.messages import HEADER_BYTES
from ..execution import Output, TaskState
from .common import Baseline, BaselineParams, ChainAgent, judge

__all__ = ["AgentNet", "AgentNetParams", "AgentNetAgent", "next_weight"]


class AgentNetParams(BaselineParams):
    """Edge-weight rule of ``AgentGraph.update_edge_weight`` (authors' code)."""

    reward: float = 1.1  # success_factor on success
    penalty: float = 0.9  # success_factor on failure
    prune_at: float = 0.3  # edge deleted when its weight is <= this
    w_min: float = 0.1  # weights are clipped to [w_min, w_max]
    w_max: float = 2.0
    w_init: float = 1.0  # AgentGraph.initilize_agents: every edge starts at 1.0


def next_weight(w: float, success: bool, p: AgentNetParams) -> tuple[float, bool]:
    """``AgentGraph.update_edge_weight`` (authors' code): the new weight and whether
    the edge is pruned (weight <= ``prune_at`` after clipping to [w_min, w_max])."""
    w = max(p.w_min, min(p.w_max, w * (p.reward if success else p.penalty)))
    return w, w <= p.prune_at


class AgentNetAgent(ChainAgent):
    method = "agentnet"

    def __init__(self, *a: Any, **kw: Any):
        super().__init__(*a, **kw)
        self.w: dict[str, float] = {}
        self.pruned: set[str] = set()
        self.decisions: dict[int, list[str]] = {}  # task -> the neighbours this router chose
        self.node.on("feedback", self._on_feedback)

    def weight(self, j: str) -> float:
        return self.w.get(j, self.params.w_init)

    # -- the router ------------------------------------------------------------
    def choose_next(self, X: TaskState, M: list[str]) -> Generator[Any, Any, list[str]]:
        live = [j for j in self.neighbours() if j not in self.pruned]
        shown = [j for j in live if j not in X.visits] or live
        if not shown:
            return []
        ctx = {"candidates": self.describe(shown), "needed": list(M), "context_items": len(X.Y)}
        r = yield from self.llm.call(self.llm.request(CallKind.SELECT, X.task, (), ctx))
        pick = r.fields.get("agent") if r.error is None else None
        if pick not in shown:
            # find_best_alternative_agent: a neighbour with the needed ability, else any
            fit = self.holders(M, shown)
            pool = fit or shown
            pick = pool[self.rnd.randrange(len(pool))]
            X.actions.append((self.name, "router_fallback"))
        return [pick] + [j for j in shown if j != pick]

    def forwarded(self, X: TaskState, nxt: str) -> None:
        self.decisions.setdefault(X.task.index, []).append(nxt)

    # -- outcome -----------------------------------------------------------------
    def returns_results(self) -> bool:
        return True

    def on_result(self, X: TaskState, y: Output) -> Generator[Any, Any, None]:
        score = yield from judge(self.llm, X, y, X.Y[:-1])
        success = score > self.params.judge_threshold
        self.sink("signal", task=X.task.index, by=self.name, about=y.agent, score=score, success=success)
        routers = []  # every agent that forwarded the task made router decisions on it
        for a in X.visits[:-1]:
            if a not in routers:
                routers.append(a)
        waits = []
        for a in routers:
            if a == self.name:
                self.update(X.task.index, success)
            else:
                waits.append(self.reliable.send(a, "feedback", {"task": X.task.index, "success": success},
                                                size=HEADER_BYTES + 8))
        if waits:
            yield self.env.all_of(waits)
        self.sink("done", task=X.task, state=X, output=y)

    def _on_feedback(self, msg) -> None:
        self.update(msg.payload["task"], bool(msg.payload["success"]))

    def update(self, task: int, success: bool) -> None:
        """AgentGraph.update_edge_weight for each decision this router made on ``task``."""
        for j in self.decisions.pop(task, []):
            self.w[j], prune = next_weight(self.weight(j), success, self.params)
            if prune and j not in self.pruned:
                self.pruned.add(j)
                self.sink("exclude", by=self.name, peer=j, excluded=True, task=task)


class AgentNet(Baseline):
    name = "agentnet"
    Params = AgentNetParams
    Agent = AgentNetAgent

    def method_summary(self) -> dict[str, Any]:
        return {"edge_weights": {a: {j: round(w, 4) for j, w in sorted(ag.w.items())}
                                 for a, ag in sorted(self.agents.items())},
                "pruned_edges": sum(len(ag.pruned) for ag in self.agents.values())}
