"""The scenario file as one pydantic model (:class:`Scenario`), over its sections
(:mod:`meshsim.scenario.sections`), and the line that names a limit a value is above."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

from pydantic import Field, SerializeAsAny, field_validator, model_validator

from .fields import Duration, EventSpec, Seed, Seeds, Strict
from .sections import (AgentsSpec, BackendSpec, Limits, MAX_NAME, NetworkSpec, OutputSpec, Phase, ProtocolSpec,
                       TasksSpec)

__all__ = ["Scenario", "over_limit"]


def _fmt(x: Any) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        x = int(x)
    return str(x) if isinstance(x, int) else f"{x:g}"


def over_limit(what: str, value: Any, key: str, limit: Any) -> str:
    unit = "s" if key == "duration" else ""
    return (f"{_fmt(value)}{unit} {what} is above limits.{key} ({_fmt(limit)}{unit}); raise it (limits: {{{key}: N}} "
            f"in the scenario, or --set limits.{key}=N) if you mean it")


class Scenario(Strict):
    name: str
    description: str = ""
    seed: Seed = 0
    #: a count N (seeds seed .. seed+N-1), a list of seeds, or a range text "9301-9320"
    seeds: Seeds = 1
    duration: Optional[Annotated[Duration, Field(gt=0)]] = None
    network: NetworkSpec
    agents: AgentsSpec = AgentsSpec()
    protocol: ProtocolSpec = ProtocolSpec()
    tasks: Optional[TasksSpec] = None
    backend: Optional[BackendSpec] = None
    phases: list[Phase] = []
    events: list[SerializeAsAny[EventSpec]] = []
    output: OutputSpec = OutputSpec()
    #: Overrides (``path: value``) that shrink the scenario for a quick run:
    #: ``meshsim run --smoke`` and the test suite apply them.
    smoke: dict[str, Any] = {}
    limits: Limits = Limits()
    #: A parameter sweep over this scenario (``meshsim sweep``, docs/sweeps.md);
    #: ignored by ``meshsim run`` and not part of the resolved scenario.
    sweep: Optional[dict[str, Any]] = Field(default=None, exclude=True)

    # Where the scenario came from (not part of the file).
    _source: str = "<scenario>"
    _base_dir: Optional[Path] = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        if len(v) > MAX_NAME:
            raise ValueError(f"at most {MAX_NAME} characters (it names the run folder runs/<name>; got {len(v)})")
        if not any(c.isalnum() for c in v):
            raise ValueError("must contain a letter or digit (it names the run folder runs/<name>)")
        return v

    @model_validator(mode="after")
    def _ends(self) -> "Scenario":
        if self.duration is None and self.tasks is None:
            raise ValueError("give 'duration' (simulated seconds) or a 'tasks' stream, so the run can end")
        return self

    def folder_name(self) -> str:
        """The default run folder's name (``runs/<folder_name>``): the name with
        every character but letters, digits, ``-``, ``_`` and ``.`` replaced, and
        no leading dot, so it is one path component that stays inside ``runs/``."""
        safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "-" for c in self.name)
        return safe.lstrip(".") or "run"

    @property
    def source(self) -> str:
        return self._source

    @property
    def base_dir(self) -> Optional[Path]:
        return self._base_dir

    def resolved(self) -> dict[str, Any]:
        """Every field with defaults filled in, as plain data (for the run folder)."""
        return self.model_dump(mode="json")

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: Any) -> Any:
        if isinstance(v, int) and v < 1:
            raise ValueError("a seed count must be >= 1 (or give a list / range of seeds)")
        return v

    def seed_list(self) -> list[int]:
        """The seeds to run: ``seed .. seed+N-1`` for a count N, else the list."""
        if isinstance(self.seeds, list):
            return list(self.seeds)
        return [self.seed + k for k in range(self.seeds)]
