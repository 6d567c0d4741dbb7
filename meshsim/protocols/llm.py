"""LLM calls from inside the simulation.

A call takes simulated time from the model's latency model (or the backend's
own ``latency``), never wall time. Synchronous backends (fakes, replays) are
called directly. Calls to async backends (real endpoints) go through a
:class:`Bridge`: every call issued at the same simulated instant, by any
agent, joins one batch sent concurrently (``asyncio.gather``); the simulation
resumes when the batch is answered, so results never depend on which reply
came back first.
"""
from __future__ import annotations

import asyncio
import random
from typing import Any, Callable, Generator, Iterable, Optional

from ..core.calls import Backend, Request, Response, TaskInfo, TaskRef
from ..core.errors import SimulationError

__all__ = ["LLMClient"]

Sink = Callable[[Request, Response, float], None]


class Bridge:
    """Batches the async calls of one simulated instant across all agents: one per
    run, made by the runner and handed to the protocol (``ProtocolContext.bridge``),
    which hands it to every agent's :class:`LLMClient`."""

    def __init__(self, env: Any, backend: Backend):
        self.env = env
        self.backend = backend
        self.pending: list = []
        self.scheduled = False
        self.used = False  # a call went through it (its counts then belong in the transport record)
        self.max_in_flight = 0
        self.batches = 0

    def submit(self, reqs: list[Request]) -> list[Any]:
        from ..core.sim import Event

        self.used = True
        events = []
        for req in reqs:
            ev = Event(self.env)
            self.pending.append((req, ev))
            events.append(ev)
        if not self.scheduled:
            self.scheduled = True
            # runs after the processes already due at this instant had their turn
            self.env.call_later(0.0, self._flush)
        return events

    def _flush(self, _ev: Any) -> None:
        batch, self.pending, self.scheduled = self.pending, [], False
        b = self.backend

        async def gather() -> list[Response]:
            return list(await asyncio.gather(*(b.complete(r) for r, _ in batch)))

        resps = asyncio.run(gather())
        self.max_in_flight = max(self.max_in_flight, len(batch))
        self.batches += 1
        for (_req, ev), resp in zip(batch, resps):
            ev.succeed(resp)


class LLMClient:
    """One agent's access to its model backend.

    ``model_for(abilities)`` is the agent's *infrastructure* (Model-Backed MAS
    Evaluation, Sec. 5): the controller asks for a call exercising some
    abilities and the infrastructure picks strong or weak; the controller
    never sees which. Likewise ``tasks(index)``: a controller knows a task by
    its :class:`TaskInfo` (what messages carry); the model's side of the call
    gets the benchmark's full :class:`TaskRef` (fakes need the gold answer to
    play a model that sometimes finds it; real prompts never show it).
    """

    def __init__(self, env: Any, backend: Backend, agent: str, model_for: Callable[[Iterable[str]], str],
                 sink: Optional[Sink] = None, fault: Optional[Callable[[], Optional[dict]]] = None,
                 tasks: Optional[Callable[[int], TaskRef]] = None, bridge: Optional[Bridge] = None):
        self.env = env
        self.bridge = bridge  # the run's batcher of async calls (None: a synchronous backend)
        self.tasks = tasks
        self.backend = backend
        self.agent = agent
        self.model_for = model_for
        self.sink = sink
        self.fault = fault  # infrastructure: the agent's injected gray failure, if any
        self._rnd = env.pyrandom("llm", agent)
        self._fault_rnd = env.pyrandom("fault", agent)
        self._latency_models: dict[str, Any] = {}

    def reseed(self, stream: random.Random) -> None:
        """Draw the call seeds from ``stream`` from now on (a consensus agent gives each
        query its own stream: common random numbers across protocols)."""
        self._rnd = stream

    def request(self, kind: str, task: Optional[TaskRef | TaskInfo], abilities: Iterable[str],
                context: Optional[dict] = None, sample: int = 0) -> Request:
        abilities = tuple(abilities)
        if isinstance(task, TaskInfo):
            task = self.tasks(task.index) if self.tasks is not None else TaskRef(
                index=task.index, id=task.id, type=task.type, question=task.question, dataset=task.dataset,
                choices=task.choices)
        context = context or {}
        spec = self.fault() if self.fault is not None else None
        if spec:
            context = _inject(spec, dict(context), self._fault_rnd)
        # positional (kind, agent, model, task, abilities, context, sample, seed): cheaper than keywords
        return Request(kind, self.agent, self.model_for(abilities), task, abilities, context, sample,
                       self._rnd.getrandbits(62))

    def _latency(self, req: Request, resp: Response) -> float:
        if resp.latency is not None:
            lat = resp.latency
        else:
            model = self._latency_models.get(req.model)
            if model is None:  # a backend's latency model depends on the model name only
                model = self._latency_models[req.model] = self.backend.latency_model(req.model)
            lat = model(resp.prompt_tokens, resp.completion_tokens)
        if "latency_factor" in req.context:
            lat *= float(req.context["latency_factor"])
        return lat

    def _answers(self, reqs: list[Request]) -> Generator[Any, Any, list[Response]]:
        if self.backend.synchronous:
            return self._sync_answers(reqs)
        if self.bridge is None:
            raise SimulationError(f"agent {self.agent}: an async backend's calls need the run's Bridge "
                                  "(ProtocolContext.bridge)")
        events = self.bridge.submit(reqs)
        out = []
        for ev in events:
            out.append((yield ev))
        return self._faulted(out)

    def _sync_answers(self, reqs: list[Request]) -> list[Response]:
        complete = self.backend.complete_sync
        out = [complete(r) for r in reqs]
        return self._faulted(out) if self.fault is not None else out

    def _faulted(self, out: list[Response]) -> list[Response]:
        spec = self.fault() if self.fault is not None else None
        if spec and spec.get("mode") == "errors":
            # the call fails after its retries: a protocol-level bad output
            out = [Response(error="injected fault", prompt_tokens=r.prompt_tokens)
                   if self._fault_rnd.random() < spec.get("rate", 0.3) else r for r in out]
        return out

    def call(self, req: Request) -> Generator[Any, Any, Response]:
        """``resp = yield from llm.call(req)``: one call, its latency in sim time."""
        if self.backend.synchronous:  # fakes and replays: no generator round trip per call
            resp = self.backend.complete_sync(req)
            if self.fault is not None:  # _faulted, inline (every call's path)
                spec = self.fault()
                if spec and spec.get("mode") == "errors" and self._fault_rnd.random() < spec.get("rate", 0.3):
                    resp = Response(error="injected fault", prompt_tokens=resp.prompt_tokens)
        else:
            (resp,) = yield from self._answers([req])
        lat = self._latency(req, resp)
        if lat > 0:
            yield self.env.timeout(lat)
        if self.sink is not None:
            self.sink(req, resp, lat)
        return resp

    def call_many(self, reqs: list[Request]) -> Generator[Any, Any, list[Response]]:
        """Independent calls issued together: they overlap, so the wait is the longest."""
        if self.backend.synchronous:  # no generator round trip (as in call)
            resps = self._sync_answers(reqs)
        else:
            resps = yield from self._answers(reqs)
        lats = [self._latency(q, r) for q, r in zip(reqs, resps)]
        longest = max(lats) if lats else 0.0
        if longest > 0:
            yield self.env.timeout(longest)
        if self.sink is not None:
            for q, r, lat in zip(reqs, resps, lats):
                self.sink(q, r, lat)
        return resps


_TEXT_KEYS = ("output_text", "drafts", "own_explanation", "other_explanation", "explanations", "candidates")


def _inject(spec: dict, ctx: dict, rnd: Any) -> dict:
    """Gray failures that keep the agent responsive but hurt quality (issue: degrade modes).

    ``temperature``: sampling temperature raised; ``truncate``: only the first
    ``keep`` fraction of every context text; ``corrupt``: a ``rate`` of the
    characters of context texts replaced; ``stale``: earlier outputs and the
    inferred requirement dropped (stale memory); ``latency``: every call
    ``factor`` times slower. ``errors`` is applied to the replies.
    """
    mode = spec.get("mode")
    if mode == "temperature":
        ctx["temperature"] = spec.get("temperature", 1.5)
    elif mode == "latency":
        ctx["latency_factor"] = spec.get("factor", 4.0)
    elif mode == "stale":
        ctx["drafts"] = []
        ctx.pop("required", None)
        ctx["stale_context"] = True
    elif mode in ("truncate", "corrupt"):
        def hurt(text: Any) -> Any:
            if isinstance(text, list):
                return [hurt(t) for t in text]
            if not isinstance(text, str) or not text:
                return text
            if mode == "truncate":
                return text[: int(len(text) * spec.get("keep", 0.3))]
            rate = spec.get("rate", 0.3)
            return "".join(chr(rnd.randrange(33, 127)) if rnd.random() < rate else c for c in text)
        for k in _TEXT_KEYS:
            if k in ctx:
                ctx[k] = hurt(ctx[k])
        ctx[f"{mode}_context"] = True
    return ctx
