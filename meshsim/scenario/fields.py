"""Field types shared by the scenario model and its events (the bottom of the scenario layer).

Durations accept ``12.5``, ``"12.5s"``, ``"50ms"``; a latency is a bare
duration (constant) or a distribution; :class:`EventSpec` is the base of every
scenario event (:mod:`meshsim.scenario.events` registers the types).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import BeforeValidator, Field, WithJsonSchema, model_validator

from ..core.strict import Strict
from ..core.types import LatencySpec, parse_duration

__all__ = ["Strict", "Duration", "Probability", "Latency", "AgentPair", "Role", "EventSpec", "Seed", "MAX_SEED",
           "MAX_LATENCY", "MAX_SIGMA", "Seeds", "parse_seeds", "SEEDS_SCHEMA", "SEEDS_HELP", "seed_list",
           "seeds_option", "check_plan_runs", "CONFIRM_RUNS"]

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
_COUNT_TEXT = r"^\s*count\s*:\s*(\d+)\s*$"
#: a plan of more runs than this needs ``--yes`` (issue 29: ``--seeds 9931`` once planned 19,862 runs of a
#: 576-agent scenario); a typo costs a line, not a night of CPU
CONFIRM_RUNS = 10_000

#: the seed grammar, for every command's --help and docs/scenarios.md#seeds
SEEDS_HELP = ("one seed 9931, a list 1,5,9, a range 9301-9320 (both ends included; '1-3,7' combines) or a "
              "count 'count:5' (5 seeds from the scenario's seed)")

#: JSON Schema of ``seeds`` (a count, a list, or a range text)
SEEDS_SCHEMA = {"anyOf": [{"type": "integer", "minimum": 1},
                          {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1,
                           "uniqueItems": True},
                          {"type": "string", "pattern": _SEED_TEXT},
                          {"type": "string", "pattern": _COUNT_TEXT}],
                "description": "a count N as a YAML integer or 'count:N' (seeds seed, seed+1, ..., seed+N-1), a "
                               "list [3, 7, 11], or a text: '9931' (that one seed), '9301-9320' (a range, both "
                               "ends included), '1-3,7' (combined)"}


def parse_seeds(v: Any) -> Any:
    """``seeds`` in the one grammar every command shares (docs/scenarios.md#seeds).

    Returns a count (an int >= 1: the seeds ``seed .. seed+N-1``) or a list of
    distinct seeds. Text, as every ``--seeds`` option takes it: ``"9931"`` is
    that one seed (never 9,931 seeds), ``"1,5,9"`` a list, ``"9301-9320"`` a
    range (both ends included), ``"1-3,7"`` both, and ``"count:5"`` a count
    (the only way a text says "how many"). A YAML integer (``seeds: 5`` in a
    scenario file, ``--set seeds=5``) stays a count, as the shipped scenarios
    use it. A list must be non-empty, of integers >= 0 and without repeats.
    ``ValueError`` names the problem in one line.
    """
    if isinstance(v, bool):
        raise ValueError("expected a count, a list of seeds or a range such as '9301-9320'")
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        import re

        text = v.strip()
        m = re.fullmatch(_COUNT_TEXT, text)
        if m:
            n = int(m.group(1))
            if not 1 <= n <= _MAX_SEEDS:
                raise ValueError(f"a seed count must be 1 ... {_MAX_SEEDS} (got {n})")
            return n
        if not re.fullmatch(_SEED_TEXT, text):
            raise ValueError("expected one seed N, a list 'A,B,C', a range 'FIRST-LAST' or a count 'count:N'")
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
            seen: set[int] = set()
            dup = next(x for x in v if x in seen or seen.add(x))  # type: ignore[func-returns-value]
            raise ValueError(f"seed {dup} is listed twice")
        if len(v) > _MAX_SEEDS:
            raise ValueError(f"more than {_MAX_SEEDS} seeds")
        return list(v)
    raise ValueError("expected a count, a list of seeds or a range such as '9301-9320'")


def seed_list(v: Any, first: int) -> list[int]:
    """The seeds of a parsed ``seeds`` value: a count N is ``first .. first+N-1``."""
    if isinstance(v, int):
        if first + v - 1 > MAX_SEED:
            raise ValueError(f"the last seed, {first} + {v} - 1, is above 2^63-1")
        return [first + k for k in range(v)]
    return list(v)


def seeds_option(text: Any, first: int, field: str = "--seeds") -> list[int]:
    """A ``--seeds`` option's text as the list of seeds it names (InputError, one line, naming the option)."""
    from ..core.errors import InputError

    try:
        return seed_list(parse_seeds(text), first)
    except ValueError as exc:
        raise InputError(str(exc), field=field, value=text) from None


def check_plan_runs(runs: int, yes: bool, field: str = "--seeds", value: Any = None, what: str = "runs",
                    file: Optional[str] = None) -> None:
    """Refuse a plan of more than :data:`CONFIRM_RUNS` runs without ``--yes``, before any work starts."""
    from ..core.errors import InputError

    if runs > CONFIRM_RUNS and not yes:
        where = {"file": file} if file else {}
        raise InputError(f"the plan holds {runs:,} {what}, more than {CONFIRM_RUNS:,}; pass --yes to run them "
                         "(a count of seeds is 'count:N'; a bare number is one seed)", field=field, value=value,
                         **where)


#: ``seeds``: a count (from ``seed`` on) or an explicit list (a range text becomes a list)
Seeds = Annotated[Any, BeforeValidator(parse_seeds), WithJsonSchema(SEEDS_SCHEMA)]


#: Agent roles of the consensus protocols (SAC, CP-WBFT; docs/sac.md).
Role = Literal["strong", "weak", "faulty", "adversarial", "ood", "persuasive", "equivocating", "colluding"]


class EventSpec(Strict):
    """Base of every scenario event: when it fires and its ``type``."""

    type: str
    at: Optional[Duration] = None
    at_task: Optional[Annotated[int, Field(ge=1)]] = None

    @model_validator(mode="after")
    def _when(self) -> "EventSpec":
        if (self.at is None) == (self.at_task is None):
            raise ValueError("give exactly one of 'at' (simulated time) or 'at_task' (task index)")
        return self
