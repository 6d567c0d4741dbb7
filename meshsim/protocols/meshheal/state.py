"""What travels with a MeshHeal task: its state X_t and the outputs in it (Sec. 4.1, App. B.1)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from ...backends.base import TaskInfo

__all__ = ["Output", "TaskState"]


@dataclass(frozen=True)
class Output:
    """One accepted output in Y_t: who wrote it, for which abilities, and its
    text (an opaque token with fakes). Whether it is right is not in it: only
    a model reading the text, or the observer grading it, can tell."""

    agent: str
    abilities: tuple[str, ...]
    action: str
    text: str = ""
    replaced_by: Optional[str] = None

    def replaced(self, by: str, text: str) -> "Output":
        return replace(self, replaced_by=by, text=text)


@dataclass
class TaskState:
    """X_t = (Q, T, R, C, Y, P) plus routing bookkeeping (Sec. 4.1)."""

    task: TaskInfo
    R: Optional[tuple[str, ...]] = None
    C: set = field(default_factory=set)
    Y: list = field(default_factory=list)
    P: list = field(default_factory=list)
    probe: bool = False
    leg_hops: int = 0  # hops since the last contribution (routing limit, App. B.7)
    visits: list = field(default_factory=list)  # every agent the state passed through
    actions: list = field(default_factory=list)

    def size_bytes(self) -> int:
        return 200 + 400 * len(self.Y) + 16 * len(self.visits)
