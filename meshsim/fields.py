"""Field types shared by the scenario model and its events (the bottom of the scenario layer).

Durations accept ``12.5``, ``"12.5s"``, ``"50ms"``; a latency is a bare
duration (constant) or a distribution; :class:`EventSpec` is the base of every
scenario event (:mod:`meshsim.events` registers the types).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

from .types import LatencySpec, parse_duration, refuse_bool_numbers

__all__ = ["Strict", "Duration", "Probability", "Latency", "AgentPair", "Role", "EventSpec", "Seed", "MAX_SEED",
           "MAX_LATENCY", "MAX_SIGMA", "Seeds", "parse_seeds", "SEEDS_SCHEMA"]

#: seeds are 0 .. 2**63-1: what numpy's SeedSequence and every stream derived from it take
MAX_SEED = 2 ** 63 - 1
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
#: the longest latency parameter, in seconds (about 32 years): far beyond any
#: run, and small enough that no latency draw overflows
MAX_LATENCY = 1e9
#: the widest lognormal latency (log-space sigma); exp(sigma**2 / 2), the mean
#: factor, is 5e21 at 10: any wider is a typo, and 1e308 overflows
MAX_SIGMA = 10.0


def _duration(v: Any) -> float:
    secs = parse_duration(v)
    if secs < 0:
        raise ValueError("must be >= 0")
    return secs


#: JSON Schema of a duration (what ``meshsim schema`` tells editors)
DURATION_SCHEMA = {"anyOf": [{"type": "number", "minimum": 0},
                             {"type": "string", "pattern": r"^\s*[0-9.eE+-]+\s*(us|ms|s|sec|m|min|h)?\s*$"}],
                   "description": "seconds, or a number with a unit: 12.5, '12.5s', '50ms', '2min', '1h'"}
Duration = Annotated[float, BeforeValidator(_duration), WithJsonSchema(DURATION_SCHEMA)]
Probability = Annotated[float, Field(ge=0.0, le=1.0)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, v: Any) -> Any:
        return refuse_bool_numbers(cls, v)


class Latency(Strict):
    """A latency distribution; a bare duration means ``constant``."""

    dist: Literal["constant", "uniform", "lognormal"] = "constant"
    value: Optional[Annotated[Duration, Field(le=MAX_LATENCY)]] = None
    low: Optional[Annotated[Duration, Field(le=MAX_LATENCY)]] = None
    high: Optional[Annotated[Duration, Field(le=MAX_LATENCY)]] = None
    median: Optional[Annotated[Duration, Field(le=MAX_LATENCY)]] = None
    sigma: Optional[Annotated[float, Field(ge=0.0, le=MAX_SIGMA)]] = None

    @model_validator(mode="before")
    @classmethod
    def _bare(cls, v: Any) -> Any:
        if isinstance(v, (int, float, str)) and not isinstance(v, bool):
            return {"dist": "constant", "value": v}
        return v

    @model_validator(mode="after")
    def _complete(self) -> "Latency":
        need = {"constant": ("value",), "uniform": ("low", "high"), "lognormal": ("median", "sigma")}
        for name in need[self.dist]:
            if getattr(self, name) is None:
                raise ValueError(f"'{self.dist}' latency needs '{name}'")
        if self.dist == "uniform" and self.high < self.low:  # type: ignore[operator]
            raise ValueError(f"'high' must be >= 'low' (got low={self.low}, high={self.high})")
        if self.dist == "lognormal" and not self.median:
            raise ValueError("'median' must be > 0")
        return self

    def spec(self) -> LatencySpec:
        return LatencySpec(self.dist, self.value or 0.0, self.low or 0.0, self.high or 0.0,
                           self.median or 0.0, self.sigma or 0.0)


AgentPair = Annotated[list[str], Field(min_length=2, max_length=2)]

_MAX_SEEDS = 100_000
_SEED_TEXT = r"^\s*\d+\s*(-\s*\d+\s*)?(,\s*\d+\s*(-\s*\d+\s*)?)*,?\s*$"

#: JSON Schema of ``seeds`` (a count, a list, or a range text)
SEEDS_SCHEMA = {"anyOf": [{"type": "integer", "minimum": 1},
                          {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1,
                           "uniqueItems": True},
                          {"type": "string", "pattern": _SEED_TEXT}],
                "description": "a count N (seeds seed, seed+1, ..., seed+N-1), a list [3, 7, 11], or a range "
                               "text '9301-9320' (both ends included; '1-3,7' combines)"}


def parse_seeds(v: Any) -> Any:
    """``seeds`` as a count (int >= 1, kept as is) or a list of distinct seeds.

    Text: ``"9301-9320"`` (a range, both ends included), ``"1,5,9"``, ``"1-3,7"``
    (a list), or ``"5"`` (a count, as in a scenario file). A list must be
    non-empty, of integers >= 0 and without repeats. ``ValueError`` names the
    problem in one line.
    """
    if isinstance(v, bool):
        raise ValueError("expected a count, a list of seeds or a range such as '9301-9320'")
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        import re

        text = v.strip()
        if re.fullmatch(r"\d+", text):
            return int(text)
        if not re.fullmatch(_SEED_TEXT, text):
            raise ValueError("expected a count N, a list 'A,B,C' or a range 'FIRST-LAST' of seeds")
        out: list[int] = []
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            if "-" in part:
                a, b = (int(x) for x in part.split("-"))
                if b < a:
                    raise ValueError(f"seed range '{part}' runs backwards (FIRST-LAST with FIRST <= LAST)")
                if b - a + 1 > _MAX_SEEDS:
                    raise ValueError(f"seed range '{part}' holds more than {_MAX_SEEDS} seeds")
                out.extend(range(a, b + 1))
            else:
                out.append(int(part))
        v = out
    if isinstance(v, (list, tuple)):
        if not v:
            raise ValueError("the list of seeds is empty")
        for x in v:
            if isinstance(x, bool) or not isinstance(x, int) or x < 0 or x > MAX_SEED:
                raise ValueError(f"seeds must be integers 0 ... 2^63-1 (got {x!r})")
        if len(set(v)) != len(v):
            dup = next(x for i, x in enumerate(v) if x in v[:i])
            raise ValueError(f"seed {dup} is listed twice")
        if len(v) > _MAX_SEEDS:
            raise ValueError(f"more than {_MAX_SEEDS} seeds")
        return list(v)
    raise ValueError("expected a count, a list of seeds or a range such as '9301-9320'")


#: ``seeds``: a count (from ``seed`` on) or an explicit list (a range text becomes a list)
Seeds = Annotated[Any, BeforeValidator(parse_seeds), WithJsonSchema(SEEDS_SCHEMA)]


#: Agent roles of the consensus protocols (SAC, CP-WBFT; docs/sac.md).
Role = Literal["strong", "weak", "faulty", "adversarial", "ood", "persuasive", "equivocating", "colluding"]


class EventSpec(BaseModel):
    """Base of every scenario event: when it fires and its ``type``."""

    model_config = ConfigDict(extra="forbid")
    type: str
    at: Optional[Duration] = None
    at_task: Optional[Annotated[int, Field(ge=1)]] = None

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, v: Any) -> Any:
        return refuse_bool_numbers(cls, v)

    @model_validator(mode="after")
    def _when(self) -> "EventSpec":
        if (self.at is None) == (self.at_task is None):
            raise ValueError("give exactly one of 'at' (simulated time) or 'at_task' (task index)")
        return self
