"""AgentNet (Yang et al. 2025, NeurIPS; public code ``zoe-yyx/AgentNet``) on the shared execution layer.

Decentralized routing by learned edge weights, as in the authors' code:

* every agent's **router** decides where a task goes next with an LLM call
  (``Agent.router_decide_action`` / ``router_decide_next_agent_id`` in
  ``AgentNet_Code/src/agent.py``): its prompt lists the neighbours it still
  routes to, excluding agents already on the task's forward history
  (``router_make_prompt``: ``task.in_forward_history``), each as the code
  shows it (``router_make_prompt`` over ``AgentGraph.collect_neighbors_info``):
  its abilities, its **success rate for this task type** ("Not Succeed Yet"
  while it has none) and its **processed tasks** of this type (its
  experience); here one ``select`` call (:mod:`meshsim.backends.fake`); an
  unusable reply falls back to a neighbour holding a needed ability
  (``find_best_alternative_agent``), else a random neighbour;
* what the router knows of a neighbour arrives in that neighbour's own
  ``status`` messages (the code reads the neighbour object directly; a
  deployed agent must be told): per task type, how many tasks it executed
  (``Agent.execute_task``: ``total_task_num += 1``) and how many of those
  succeeded (``Agent.update_abilities``: ``successful_task_num += 1``, told
  by the entry's ``feedback``); it sends one whenever these change. The
  success rate shown is successes / executions (``success_rate[task_type]``);
  the processed-task count stands for the code's retrieved examples of
  processed tasks (their texts are not modelled);
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

**Assumed / left out**: the neighbours' numeric ability levels (the code's
``abilities`` dict, raised by 0.1 on success) are shown as the declared
ability set; the neighbour's current load, the router's own retrieved router
experiences and the processed tasks' texts are not shown (meshsim agents
serve one call at a time and texts are opaque); the entry's judge stands in
for the gold answer (above). With the fake, how the router weighs a shown
success rate is a call-level assumption (:mod:`meshsim.backends.fake`,
``select``).
"""
from __future__ import annotations

from typing import Any, Generator

from ...core.calls import CallKind
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
    # deliberate repetition: each baseline agent declares its method, Params type and state like this (typed, issue 31)
    method = "agentnet"

    params: AgentNetParams

    def __init__(self, *a: Any, **kw: Any):
        super().__init__(*a, **kw)
        self.w: dict[str, float] = {}
        self.pruned: set[str] = set()
        self.decisions: dict[int, list[str]] = {}  # task -> the neighbours this router chose
        # own execution record by task type: [executed, succeeded] (total_task_num, successful_task_num)
        self.record: dict[str, list[int]] = {}
        self.executed: dict[int, str] = {}  # task -> its type, until the entry's feedback arrives
        self.peer_record: dict[str, dict[str, tuple[int, int]]] = {}  # what neighbours' status said
        self.node.on("feedback", self._on_feedback)
        self.node.on("status", self._on_status)

    def weight(self, j: str) -> float:
        return self.w.get(j, self.params.w_init)

    # -- what neighbours tell about themselves -------------------------------------
    def _announce(self) -> None:
        """A ``status`` to every neighbour: per task type, tasks executed and succeeded."""
        counts = [[t, n, k] for t, (n, k) in sorted(self.record.items())]
        for j in self.neighbours():
            self.node.send(j, "status", {"counts": counts}, size=HEADER_BYTES + 24 * (1 + len(counts)))

    def _on_status(self, msg) -> None:
        self.peer_record[msg.src] = {str(t): (int(n), int(k)) for t, n, k in msg.payload["counts"]}

    def neighbour_view(self, j: str, task_type: str) -> dict:
        """One neighbour as ``router_make_prompt`` lists it: abilities, success rate for this task
        type (None: "Not Succeed Yet") and processed tasks of this type, from its last status."""
        n, k = self.peer_record.get(j, {}).get(task_type, (0, 0))
        return {"agent": j, "abilities": sorted(self.peer_abilities.get(j, frozenset())),
                "success_rate": (k / n) if (n and k) else None, "processed": n}

    def before_output(self, X: TaskState, H: frozenset, action: str) -> Generator[Any, Any, None]:
        """``Agent.execute_task``: an execution of this task type is counted (and announced)."""
        rec = self.record.setdefault(X.task.type, [0, 0])
        rec[0] += 1
        self.executed[X.task.index] = X.task.type
        self._announce()
        return
        yield

    # -- the router ------------------------------------------------------------
    def choose_next(self, X: TaskState, M: list[str]) -> Generator[Any, Any, list[str]]:
        live = [j for j in self.neighbours() if j not in self.pruned]
        shown = [j for j in live if j not in X.visits] or live
        if not shown:
            return []
        ctx = {"candidates": [self.neighbour_view(j, X.task.type) for j in shown], "needed": list(M),
               "context_items": len(X.Y)}
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
        for a in X.P:  # every executor updates its success record (update_abilities)
            if a not in routers:
                routers.append(a)
        waits = []
        for a in routers:
            if a == self.name:
                self.update(X.task.index, success)
            else:
                sent = self.reliable.send(a, "feedback", {"task": X.task.index, "success": success},
                                          size=HEADER_BYTES + 8)
                assert sent is not None  # (wait=True: an event)
                waits.append(sent)
        if waits:
            yield self.env.all_of(waits)
        self.sink("done", task=X.task, state=X, output=y)

    def _on_feedback(self, msg) -> None:
        self.update(msg.payload["task"], bool(msg.payload["success"]))

    def update(self, task: int, success: bool) -> None:
        """AgentGraph.update_edge_weight for each decision this router made on ``task``; and, if
        this agent executed part of it, Agent.update_abilities' success count."""
        t = self.executed.pop(task, None)
        if t is not None and success:
            self.record[t][1] += 1
            self._announce()
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
                "task_records": {a: {t: list(v) for t, v in sorted(ag.record.items())}
                                 for a, ag in sorted(self.agents.items())},
                "pruned_edges": sum(len(ag.pruned) for ag in self.agents.values())}
