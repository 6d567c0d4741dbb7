"""LLM calls from inside the simulation.

A call takes simulated time from the model's latency model (or the backend's
own ``latency``), never wall time. Synchronous backends (fakes, replays) are
called directly; async ones are driven to completion in an event loop, with
calls issued together (``call_many``) in flight concurrently.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Generator, Iterable, Optional

from ..backends.base import Backend, Request, Response, TaskRef

__all__ = ["LLMClient"]

Sink = Callable[[Request, Response, float], None]


class LLMClient:
    """One agent's access to its model backend.

    ``model_for(abilities)`` is the agent's *infrastructure* (Model-Backed MAS
    Evaluation, Sec. 5): the controller asks for a call exercising some
    abilities and the infrastructure picks strong or weak; the controller
    never sees which.
    """

    def __init__(self, env: Any, backend: Backend, agent: str, model_for: Callable[[Iterable[str]], str],
                 sink: Optional[Sink] = None):
        self.env = env
        self.backend = backend
        self.agent = agent
        self.model_for = model_for
        self.sink = sink
        self._rnd = env.pyrandom("llm", agent)

    def request(self, kind: str, task: Optional[TaskRef], abilities: Iterable[str],
                context: Optional[dict] = None, sample: int = 0) -> Request:
        abilities = tuple(abilities)
        return Request(kind=kind, agent=self.agent, model=self.model_for(abilities), task=task,
                       abilities=abilities, context=context or {}, sample=sample,
                       seed=self._rnd.getrandbits(62))

    def _run(self, reqs: list[Request]) -> list[Response]:
        b = self.backend
        if b.synchronous:
            return [b.complete_sync(r) for r in reqs]

        async def gather() -> list[Response]:
            return list(await asyncio.gather(*(b.complete(r) for r in reqs)))

        return asyncio.run(gather())

    def _latency(self, req: Request, resp: Response) -> float:
        if resp.latency is not None:
            return resp.latency
        return self.backend.latency_model(req.model)(resp.prompt_tokens, resp.completion_tokens)

    def call(self, req: Request) -> Generator[Any, Any, Response]:
        """``resp = yield from llm.call(req)``: one call, its latency in sim time."""
        (resp,) = self._run([req])
        lat = self._latency(req, resp)
        if lat > 0:
            yield self.env.timeout(lat)
        if self.sink is not None:
            self.sink(req, resp, lat)
        return resp

    def call_many(self, reqs: list[Request]) -> Generator[Any, Any, list[Response]]:
        """Independent calls issued together: they overlap, so the wait is the longest."""
        resps = self._run(reqs)
        lats = [self._latency(q, r) for q, r in zip(reqs, resps)]
        longest = max(lats) if lats else 0.0
        if longest > 0:
            yield self.env.timeout(longest)
        if self.sink is not None:
            for q, r, lat in zip(reqs, resps, lats):
                self.sink(q, r, lat)
        return resps
