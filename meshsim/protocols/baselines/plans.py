"""Parallel chains of agents, for the methods that generate several candidates
and aggregate them (Symphony's plans, SAC's teams; MeshHeal App. B.4:
"repeated candidate generation and aggregation").

A coordinator (the task's entry agent) drives each chain: it sends step i —
the task state with the chain's ability pair — to ``chain[i]`` as a ``plan``
message; that agent does ability ``R[i]`` with the shared worker calls
(Contribute, then Finalize for the last step; the last one also runs the
method's finishing step, SAC's rounds) and replies with the updated state,
its output and the answer it parsed (``plan_step``). The chain members are
the coordinator's neighbours (it recruited them from their ``hello``
declarations), so every step is one hop away on any topology. The
coordinator waits for every chain (or ``round_timeout``) and aggregates.

A chain may leave a step's agent open (``None``): the coordinator then picks it
just before the step (:meth:`PlanAgent.pick_step`; Symphony selects each step
when it is reached), and :meth:`PlanAgent.on_step` tells it how each step
went (its output and the round trip it measured).
"""
from __future__ import annotations

from typing import Any, Generator, Optional, cast

from ...core.sim import Event

from ...net.messages import HEADER_BYTES
from ..execution import Output, TaskState, generate_answer
from .common import ChainAgent

__all__ = ["PlanAgent"]


class PlanAgent(ChainAgent):
    """A controller that can coordinate parallel chains and work in them."""

    def __init__(self, *a: Any, **kw: Any):
        super().__init__(*a, **kw)
        self._replies: dict[tuple[int, int, int], Event] = {}
        self.node.on("plan", self._on_plan)
        self.node.on("plan_step", self._on_plan_step)

    # -- the coordinator -------------------------------------------------------------------
    def run_plans(self, plans: list[tuple[TaskState, list[Optional[str]]]],
                  extra: Optional[dict] = None) -> Generator[Any, Any, dict[int, tuple[Output, Optional[str]]]]:
        """Drive every (state, chain) in parallel; their final outputs and answers by plan."""
        got: dict[int, tuple[Output, Optional[str]]] = {}
        procs = [self.node.spawn(self._drive(k, X, chain, extra or {}, got)) for k, (X, chain) in enumerate(plans)]
        yield self.env.all_of(procs) | self.env.timeout(self.params.round_timeout)
        return dict(got)

    def _drive(self, k: int, X: TaskState, chain: list[Optional[str]], extra: dict,
               got: dict) -> Generator[Any, Any, None]:
        t = X.task.index
        y: Optional[Output] = None
        answer: Optional[str] = None
        for i in range(len(chain)):
            a = chain[i]
            if a is None:
                a = yield from self.pick_step(k, i, X, chain)
                if a is None:
                    self.sink("note", task=t, note=f"plan {k}: no candidate for step {i}")
                    return
                chain[i] = a
            body = dict(extra, state=X, chain=list(chain), plan=k)
            t0 = self.env.now
            if a == self.name:
                X, y, answer = yield from self._do_step(body)
                self.on_step(k, i, a, X, y, self.env.now - t0)
                continue
            ev = Event(self.env)
            self._replies[(t, k, i)] = ev
            ok = yield self.reliable.send(a, "plan", body, size=HEADER_BYTES + X.size_bytes() + 16 * len(chain))
            if ok:
                res = yield ev | self.env.timeout(self.params.round_timeout)
            self._replies.pop((t, k, i), None)
            if not ok or ev not in res:
                self.sink("note", task=t, note=f"plan {k}: step {i} at {a} did not come back")
                return
            X, y, answer = cast(tuple[TaskState, Output, Optional[str]], ev.value)  # the step's reply
            self.on_step(k, i, a, X, y, self.env.now - t0)
        if y is not None:
            got[k] = (y, answer)

    def pick_step(self, k: int, i: int, X: TaskState,
                  chain: list) -> Generator[Any, Any, Optional[str]]:
        """The agent for step ``i`` of plan ``k``, chosen when the step is reached
        (only called for a chain that leaves it open)."""
        return None
        yield

    def on_step(self, k: int, i: int, agent: str, X: TaskState, y: Optional[Output], elapsed: float) -> None:
        """Step ``i`` of plan ``k`` came back from ``agent`` after ``elapsed`` seconds."""

    def _on_plan_step(self, msg) -> None:
        p = msg.payload
        ev = self._replies.get((p["task"], p["plan"], p["step"]))
        if ev is not None and not ev.triggered:
            ev.succeed((p["state"], p["output"], p.get("answer")))

    # -- a chain member -------------------------------------------------------------------------
    def _on_plan(self, msg) -> Generator:
        return self._serve_step(msg.src, msg.payload)

    def _serve_step(self, coordinator: str, body: dict) -> Generator[Any, Any, None]:
        step = len(body["state"].Y)
        X, y, answer = yield from self._do_step(body)
        self.reliable.send(coordinator, "plan_step", {"task": X.task.index, "plan": body["plan"], "step": step,
                                                      "state": X, "output": y, "answer": answer},
                           size=HEADER_BYTES + X.size_bytes())

    def _do_step(self, body: dict) -> Generator[Any, Any, tuple[TaskState, Output, Optional[str]]]:
        X: TaskState = body["state"]
        chain: list[str] = body["chain"]
        i = len(X.Y)
        assert X.R is not None  # a plan's state carries its pairs
        s = X.R[i]
        last = i == len(chain) - 1
        action = "finalize" if last else "contribute"
        X.visits.append(self.name)
        y, answer = yield from generate_answer(self.llm, self.name, self.K, action, (s,), X)
        X.actions.append((self.name, action))
        X.Y.append(y)
        X.P.append(self.name)
        X.C.add(s)
        if last:
            y, answer = yield from self.finish_chain(X, y, answer, body)
        return X, y, answer

    def finish_chain(self, X: TaskState, y: Output, answer: Optional[str],
                     body: dict) -> Generator[Any, Any, tuple[Output, Optional[str]]]:
        """The last chain member's step before replying (SAC: the filter-and-refine rounds)."""
        return y, answer
        yield
