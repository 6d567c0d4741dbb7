"""Parallel chains of agents, for the methods that generate several candidates
and aggregate them (Symphony's plans, SAC's teams; MeshHeal App. B.4:
"repeated candidate generation and aggregation").

A coordinator (the task's entry agent) dispatches each chain as a ``plan``
message: the task state with the chain's ability pair and the agents that
do each step, in order. Step i is done by ``chain[i]`` for ability ``R[i]``
with the shared worker calls (Contribute, then Finalize for the last step);
the last agent reports its final output and parsed answer to the coordinator
(``plan_done``), after the method's own finishing step (SAC's rounds). The
coordinator waits for every chain (or ``round_timeout``) and aggregates.
"""
from __future__ import annotations

from typing import Any, Generator, Optional

from simpy.events import Event

from ...net.messages import HEADER_BYTES
from ..execution import Output, TaskState, generate_answer
from .common import ChainAgent

__all__ = ["PlanAgent"]


class PlanAgent(ChainAgent):
    """A controller that can coordinate parallel chains and work in them."""

    def __init__(self, *a: Any, **kw: Any):
        super().__init__(*a, **kw)
        self._collect: dict[int, dict] = {}
        self.node.on("plan", self._on_plan)
        self.node.on("plan_done", self._on_plan_done, inline=True)

    # -- the coordinator -------------------------------------------------------------------
    def run_plans(self, plans: list[tuple[TaskState, list[str]]],
                  extra: Optional[dict] = None) -> Generator[Any, Any, dict[int, tuple[Output, Optional[str]]]]:
        """Dispatch every (state, chain); wait for their final outputs and answers."""
        t = plans[0][0].task.index
        box = self._collect[t] = {"want": len(plans), "got": {}, "ev": Event(self.env)}
        for k, (X, chain) in enumerate(plans):
            body = dict(extra or {}, state=X, chain=list(chain), plan=k)
            if chain[0] == self.name:
                self.node.spawn(self._step(body))
            else:
                self.reliable.send(chain[0], "plan", body, size=HEADER_BYTES + X.size_bytes() + 16 * len(chain))
        ev = box["ev"]
        if len(box["got"]) < box["want"]:
            yield ev | self.env.timeout(self.params.round_timeout)
        self._collect.pop(t, None)
        return dict(box["got"])

    def _on_plan_done(self, msg) -> None:
        p = msg.payload
        self._got(p["task"], p["plan"], p["output"], p.get("answer"))

    def _got(self, task: int, k: int, y: Output, answer: Optional[str]) -> None:
        box = self._collect.get(task)
        if box is None:
            return  # too late: the coordinator went on without this chain
        box["got"][k] = (y, answer)
        if len(box["got"]) >= box["want"] and not box["ev"].triggered:
            box["ev"].succeed()

    # -- a chain member -------------------------------------------------------------------------
    def _on_plan(self, msg) -> Generator:
        return self._step(msg.payload)

    def _step(self, body: dict) -> Generator[Any, Any, None]:
        X: TaskState = body["state"]
        chain: list[str] = body["chain"]
        i = len(X.Y)
        s = X.R[i]
        last = i == len(chain) - 1
        action = "finalize" if last else "contribute"
        X.visits.append(self.name)
        y, answer = yield from generate_answer(self.llm, self.name, self.K, action, (s,), X)
        X.actions.append((self.name, action))
        X.Y.append(y)
        X.P.append(self.name)
        X.C.add(s)
        if not last:
            nxt = chain[i + 1]
            if nxt == self.name:
                yield from self._step(body)
                return
            ok = yield self.reliable.send(nxt, "plan", body, size=HEADER_BYTES + X.size_bytes() + 16 * len(chain))
            if not ok:
                self.sink("note", task=X.task.index, note=f"plan {body['plan']}: {nxt} unreachable")
            return
        y, answer = yield from self.finish_chain(X, y, answer, body)
        coordinator = X.visits[0]
        if coordinator == self.name:
            self._got(X.task.index, body["plan"], y, answer)
        else:
            self.reliable.send(coordinator, "plan_done", {"task": X.task.index, "plan": body["plan"], "output": y,
                                                          "answer": answer}, size=HEADER_BYTES + 440)

    def finish_chain(self, X: TaskState, y: Output, answer: Optional[str],
                     body: dict) -> Generator[Any, Any, tuple[Output, Optional[str]]]:
        """The last chain member's step before reporting (SAC: the filter-and-refine rounds)."""
        return y, answer
        yield
