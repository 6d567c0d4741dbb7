"""One exception tree for everything meshsim raises on purpose.

Errors about user input carry where the problem is (file, field path, value)
so the CLI can print a single line and exit 2; anything else is a bug (exit 1).
"""
from __future__ import annotations

from typing import Any


class MeshsimError(Exception):
    """Base of every error meshsim raises deliberately."""

    exit_code = 1


class InputError(MeshsimError):
    """Bad user input: a scenario, topology file, CLI flag or backend reply.

    ``str(err)`` is one line: ``FILE: FIELD: MESSAGE (got VALUE)``; each part is
    omitted when unknown.
    """

    exit_code = 2
    _MISSING = object()

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None,
                 value: Any = _MISSING):
        self.message = message
        self.file = file
        self.field = field
        self.value = value
        super().__init__(self.format())

    def format(self) -> str:
        parts = []
        if self.file:
            parts.append(str(self.file))
        if self.field:
            parts.append(str(self.field))
        msg = self.message
        if self.value is not InputError._MISSING:
            msg = f"{msg} (got {_short(self.value)})"
        parts.append(msg)
        return ": ".join(parts).replace("\n", " ")

    def with_file(self, file: str) -> "InputError":
        """Return the same error attributed to ``file`` (when it had none)."""
        if self.file:
            return self
        return type(self)(self.message, file=file, field=self.field, value=self.value)


def _short(value: Any, limit: int = 80) -> str:
    # Cut in the middle: a long path's tail (its file name) is what the user needs.
    text = repr(value)
    if len(text) <= limit:
        return text
    head = (limit - 3) // 2
    return text[:head] + "..." + text[len(text) - (limit - 3 - head):]


class ScenarioError(InputError):
    """A scenario file (or an override of it) is malformed or impossible."""


class TopologyError(InputError):
    """A topology cannot be built, read or is unsuitable (e.g. disconnected)."""


class BackendError(MeshsimError):
    """An LLM backend failed (after its retries) or answered unusably."""


class RunFolderError(InputError):
    """A run folder is missing, partial, or belongs to a different scenario."""


class SimulationError(MeshsimError):
    """The simulation reached an impossible state (a bug, not bad input)."""
