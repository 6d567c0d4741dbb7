"""What a fake model's text *is*, kept where only fakes and the observer look.

A real model answers with text; a message carries that text and a receiving
model reads it. A fake has no text to write, so it writes a short opaque
token instead (``<fake 12:3f9a...>``) and remembers, here, what a real text in
its place would have been: whether its content is right, the final answer it
commits to, and the *observable features* a reader would notice (e.g.
``incoherent``). Only the producing fake draws those, from its own model's
distribution.

Messages carry the token exactly as they would carry a text, so nothing a
real message would not carry crosses a link. When another fake call is given
the token (a reviewer scoring an output, a finalizer reading drafts), looking
it up here stands for reading the text. The store never records who wrote a
text, with which model, or in which role: a reader cannot condition on that.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..core.calldata import rebuilt

__all__ = ["Latent", "TextStore", "UNREADABLE"]


@dataclass(slots=True)
class Latent:  # not frozen: built on every fake call (a frozen dataclass costs 3x); never mutated
    """What a reader of the text would find in it."""

    #: the content is right: a sound half, a correct candidate, an answer equal to the gold one
    correct: bool
    #: for a committed final answer (Finalize, a Takeover of one): the task's outcome
    final: Optional[bool] = None
    #: the answer the text commits to (consensus answers), if any
    answer: Optional[str] = None
    #: observable properties of the text, drawn by the producing model
    features: frozenset = frozenset()

    def __init__(self, correct: bool, final: Optional[bool] = None, answer: Optional[str] = None,
                 features: frozenset = frozenset()) -> None:
        # written out: compiled, it is native; the one dataclasses generates runs interpreted (docs/scaling.md)
        self.correct = correct
        self.final = final
        self.answer = answer
        self.features = features

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuilt(self)


#: what an empty or unknown text reads as: nothing usable
UNREADABLE = Latent(correct=False, final=False, features=frozenset({"incoherent", "empty"}))


class TextStore:
    """Latent content of every text a fake produced, grouped by task so a long
    run can drop a task's texts once the observer has graded it."""

    __slots__ = ("prefix", "_by_task")

    def __init__(self, prefix: str = "fake"):
        self.prefix = prefix
        self._by_task: dict[str, dict[str, Latent]] = {}

    def put(self, task_id: str, seed: int, latent: Latent) -> str:
        """Store ``latent`` and return the token that stands for its text."""
        texts = self._by_task.get(task_id)
        if texts is None:
            texts = self._by_task[task_id] = {}
        text = f"<{self.prefix} {task_id} {seed & 0xFFFFFFFFFFFFFFFF:016x}>"
        while text in texts:  # the same call seed twice (never in practice): keep both
            seed += 1
            text = f"<{self.prefix} {task_id} {seed & 0xFFFFFFFFFFFFFFFF:016x}>"
        texts[text] = latent
        return text

    def get(self, task_id: str, text: Optional[str]) -> Optional[Latent]:
        """What ``text`` (a token of task ``task_id``) holds; None for a text this store never wrote."""
        if not text:
            return None
        texts = self._by_task.get(task_id)
        return texts.get(text) if texts is not None else None

    def read(self, task_id: str, text: Optional[str]) -> Latent:
        """Like :meth:`get`, but an unknown or empty text reads as unusable."""
        # the lookup written out, not through get(): on every review call's path
        if not text:
            return UNREADABLE
        texts = self._by_task.get(task_id)
        got = texts.get(text) if texts is not None else None
        return UNREADABLE if got is None else got

    def forget(self, task_id: str) -> None:
        self._by_task.pop(task_id, None)

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_task.values())
