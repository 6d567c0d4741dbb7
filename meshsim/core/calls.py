"""The LLM backend interface (never imports simpy).

A backend answers :class:`Request` with :class:`Response`. Real backends are
async (``await backend.complete(req)``); fakes that never wait set
``synchronous = True`` and implement ``complete_sync`` so the simulator calls
them directly without paying for an event loop per call.

Simulated latency of a call comes from the model's :class:`LatencyModel`
(time to first token + completion tokens / decode rate), never from the wall
clock, so results do not depend on how fast the real endpoint was.
"""
from __future__ import annotations

from typing import Any, Optional

from .calldata import LatencyModel, Request, Response, TaskInfo, TaskRef

__all__ = ["CallKind", "TaskRef", "TaskInfo", "Request", "Response", "LatencyModel", "Backend", "NullBackend"]


class CallKind:
    """Names of the calls protocols make (strings, so new ones need no enum edit)."""

    INFER = "infer_abilities"
    CONTRIBUTE = "contribute"
    FINALIZE = "finalize"
    REVIEW = "review"
    COMMITTEE = "committee_round"
    TAKEOVER_CANDIDATE = "takeover_candidate"
    SYNTHESIS = "synthesis"
    SELECT = "select"  # baselines: pick an agent from a listed set (AutoGen speaker selection, AgentNet router)
    SUMMARIZE = "summarize"  # baselines: AutoGen's manager restating the conversation's answer
    SAC_ANSWER = "sac_answer"
    SAC_SCORE = "sac_score"
    SAC_REFINE = "sac_refine"


class Backend:
    """Base backend. Subclasses implement ``complete`` (async) or ``complete_sync``."""

    #: True when ``complete_sync`` never waits (fakes, replays): no event loop needed.
    synchronous = False
    #: True when a run through this backend and its replay write the same run
    #: folder (how calls were served then stays out of summary.json)
    replayable = False
    name = "backend"

    def latency_model(self, model: str) -> LatencyModel:
        return LatencyModel()

    def complete_sync(self, request: Request) -> Response:
        raise NotImplementedError(f"{type(self).__name__} has no synchronous path")

    async def complete(self, request: Request) -> Response:
        return self.complete_sync(request)

    def describe(self) -> dict[str, Any]:
        """What goes into the run summary about this backend (never secrets)."""
        return {"name": self.name}

    def transport(self) -> dict[str, Any]:
        """How calls were served (wall time, retries, cassette hits): facts about
        the wire, not results, so never part of a replayable run folder."""
        return {}

    def close(self) -> None:
        """Release connections, flush recordings."""

    def preflight(self) -> None:
        """Check, before the clock starts, that whatever serves the calls is
        there (one request per endpoint); raise ``InputError`` with a hint
        when it is not. Backends that need nothing outside the process do nothing."""

    def grade(self, task: TaskRef, text: str, action: Optional[str] = None) -> Optional[bool]:
        """The observer's grade of a text this backend produced for ``task``
        (metrics only; no agent ever calls it): does a committed final answer
        match the gold one? None when it cannot tell (an intermediate half has
        no gold answer of its own; a backend without a grader)."""
        return None

    def final_answer(self, task: TaskRef, text: str) -> Optional[str]:
        """The answer a final text commits to, as the observer reads it (metrics
        only: tells a Takeover that changed the answer from one that kept it)."""
        return None

    def forget(self, task_id: str) -> None:
        """The observer is done with ``task_id``: drop whatever was kept for it."""


class NullBackend(Backend):
    """Answers nothing: for protocols that make no LLM calls."""

    synchronous = True
    name = "null"

    def complete_sync(self, request: Request) -> Response:
        return Response(error="null backend")
