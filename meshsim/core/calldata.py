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


def rebuilt(obj: Any) -> tuple[Any, ...]:
    """``__reduce__`` of a dataclass record that the compiled build makes native: its class and its fields in
    order. Compiled, a frozen class, or one with a constructor of its own, cannot be rebuilt attribute by
    attribute (how pickle and copy rebuild a slotted dataclass), so it is rebuilt by its constructor."""
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
        return rebuilt(self)


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
        return rebuilt(self)

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

    # Written out (the dataclass keeps a class's own __init__): compiled, this one is native, while the
    # one dataclasses generates would run interpreted, 4x slower, on every call (docs/scaling.md)
    def __init__(self, kind: str, agent: str, model: str, task: Optional[TaskRef] = None,
                 abilities: tuple[str, ...] = (), context: Optional[dict[str, Any]] = None, sample: int = 0,
                 seed: int = 0) -> None:
        self.kind = kind
        self.agent = agent
        self.model = model
        self.task = task
        self.abilities = abilities
        self.context = {} if context is None else context
        self.sample = sample
        self.seed = seed

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuilt(self)


@dataclass(slots=True)
class Response:  # not frozen: a frozen dataclass costs 3x to build, twice per call (issue 22); never mutated
    text: str = ""
    fields: dict[str, Any] = field(default_factory=dict)  # parsed outputs: score, correct, pair, ...
    correct: Optional[bool] = None  # ground truth where the backend knows it
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency: Optional[float] = None  # simulated seconds; None -> caller's latency model
    error: Optional[str] = None  # set when the call failed after retries (bad output)

    def __init__(self, text: str = "", fields: Optional[dict[str, Any]] = None, correct: Optional[bool] = None,
                 prompt_tokens: int = 0, completion_tokens: int = 0, latency: Optional[float] = None,
                 error: Optional[str] = None) -> None:  # written out: see Request.__init__
        self.text = text
        self.fields = {} if fields is None else fields
        self.correct = correct
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.latency = latency
        self.error = error

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuilt(self)

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
        return rebuilt(self)

    def __call__(self, prompt_tokens: int, completion_tokens: int) -> float:
        t = self.ttft + completion_tokens / self.rate
        if self.prefill_rate:
            t += prompt_tokens / self.prefill_rate
        return t
