"""What one LLM call carries: the task it belongs to, the request and the
response, and the model's latency (:mod:`meshsim.core.calls` holds the
backend interface and re-exports these). A module of its own so that the
compiled build (tests/benchmarks/build_compiled.py) makes them native
classes, read as struct fields on every call, while ``Backend``, which
Python subclasses extend, stays interpreted."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Optional

__all__ = ["TaskRef", "TaskInfo", "Request", "Response", "LatencyModel"]


def _rebuilt(obj: Any) -> tuple[Any, ...]:
    """``__reduce__`` of a frozen record: its class and its fields in order. Compiled, a frozen class cannot be
    rebuilt attribute by attribute (how pickle and copy rebuild a slotted dataclass), so it is rebuilt by its
    constructor."""
    return type(obj), tuple(getattr(obj, f.name) for f in fields(obj))


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """What a message may carry about a task: the question and its benchmark
    label, never its gold answer or required abilities (Sec. 3.1: Q_t and T_t
    are given to agents, R_t must be inferred)."""

    index: int
    id: str
    type: str
    question: str = ""
    dataset: str = ""
    choices: tuple[str, ...] = ()

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuilt(self)


@dataclass(frozen=True, slots=True)
class TaskRef:
    """What a backend may know about the task a call belongs to.

    ``answer`` and ``required`` are ground truth: real backends never put
    them in a prompt; fakes use them to decide latent correctness. A TaskRef
    never crosses a simulated link: controllers hold its :meth:`info`.
    """

    index: int
    id: str
    type: str
    question: str = ""
    answer: Any = None
    required: tuple[str, ...] = ()
    dataset: str = ""
    choices: tuple[str, ...] = ()

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuilt(self)

    def info(self) -> TaskInfo:
        return TaskInfo(index=self.index, id=self.id, type=self.type, question=self.question,
                        dataset=self.dataset, choices=self.choices)


@dataclass(slots=True)
class Request:  # not frozen: a frozen dataclass costs 3x to build, twice per call (issue 22); never mutated
    kind: str
    agent: str
    model: str  # model role or name chosen by the caller ("strong" / "weak" / an id)
    task: Optional[TaskRef] = None
    abilities: tuple[str, ...] = ()  # abilities the call exercises (H, or the reviewed ability)
    context: dict[str, Any] = field(default_factory=dict)  # call-specific inputs (see protocols)
    sample: int = 0  # index among repeated independent calls (three initial reviews: 0, 1, 2)
    seed: int = 0  # per-call seed drawn by the caller from its own stream


@dataclass(slots=True)
class Response:  # not frozen: a frozen dataclass costs 3x to build, twice per call (issue 22); never mutated
    text: str = ""
    fields: dict[str, Any] = field(default_factory=dict)  # parsed outputs: score, correct, pair, ...
    correct: Optional[bool] = None  # ground truth where the backend knows it
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency: Optional[float] = None  # simulated seconds; None -> caller's latency model
    error: Optional[str] = None  # set when the call failed after retries (bad output)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class LatencyModel:
    """Simulated seconds for one call: ttft + prompt/prefill_rate + completion/rate."""

    ttft: float = 0.5
    rate: float = 50.0  # completion tokens per second
    prefill_rate: float = 0.0  # prompt tokens per second; 0 = included in ttft

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuilt(self)

    def __call__(self, prompt_tokens: int, completion_tokens: int) -> float:
        t = self.ttft + completion_tokens / self.rate
        if self.prefill_rate:
            t += prompt_tokens / self.prefill_rate
        return t
