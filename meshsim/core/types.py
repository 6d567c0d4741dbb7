"""Small frozen records shared across layers (no behaviour, no simpy)."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

AgentId = str


class RoutingState(str, enum.Enum):
    """MeshHeal's per-agent routing state (Sec. 4.2.2)."""

    NORMAL = "normal"
    WATCHED = "watched"
    ISOLATED = "isolated"


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One line of ``events.jsonl``: simulated time, record type, fields."""

    t: float
    type: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class LatencySpec:
    """A link latency distribution in seconds.

    ``dist`` is ``constant`` (uses ``value``), ``uniform`` (``low``..``high``) or
    ``lognormal`` (``median`` and log-space ``sigma``).
    """

    dist: str = "constant"
    value: float = 0.01
    low: float = 0.0
    high: float = 0.0
    median: float = 0.0
    sigma: float = 0.0

    def mean(self) -> float:
        import math

        if self.dist == "constant":
            return self.value
        if self.dist == "uniform":
            return (self.low + self.high) / 2
        return self.median * math.exp(self.sigma ** 2 / 2)


_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_duration(value: Any) -> float:
    """Seconds from ``12.5``, ``"12.5s"``, ``"50ms"``, ``"2min"`` or ``"1h"``.

    Raises ``ValueError`` (with the allowed forms) for anything else, and for
    NaN and infinity (``"inf"``, ``.nan``, ``"1e999s"``): no duration is endless.
    """
    secs = _parse_duration(value)
    if secs != secs or secs in (float("inf"), float("-inf")):
        raise ValueError("must be a finite duration (got %r)" % (value,))
    return secs


def _parse_duration(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 12.5, '12.5s' or '50ms'")
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            raise ValueError("must be a finite duration") from None
    if isinstance(value, str):
        text = value.strip().lower()
        for unit in sorted(_UNITS, key=len, reverse=True):
            if text.endswith(unit):
                num = text[: -len(unit)].strip()
                try:
                    return float(num) * _UNITS[unit]
                except ValueError:
                    break
        try:
            return float(text)
        except ValueError:
            pass
    raise ValueError("expected a duration such as 12.5, '12.5s' or '50ms'")


def _takes_bool(annotation: Any) -> bool:
    """Whether a field's annotation admits ``bool`` (or anything)."""
    import typing

    if annotation is bool or annotation is Any or annotation is object:
        return True
    return any(_takes_bool(a) for a in typing.get_args(annotation))


def refuse_bool_numbers(model: Any, data: Any) -> Any:
    """A pydantic ``model_validator(mode="before")`` body: a boolean given where a
    number belongs is an error, not 1.0 or 0 (YAML's ``yes``/``true`` in a
    probability was read as certainty; issue 19). Fields typed to take a bool
    keep it."""
    if not isinstance(data, dict):
        return data
    fields = getattr(model, "model_fields", {})
    import typing

    for name, value in data.items():
        f = fields.get(name)
        if f is None:
            continue
        if isinstance(value, bool) and not _takes_bool(f.annotation):
            raise ValueError(f"'{name}' must be a number, not a boolean ({str(value).lower()})")
        if isinstance(value, dict) and typing.get_origin(f.annotation) is dict:
            item = typing.get_args(f.annotation)[-1]  # dict[str, float]: the mapping's values
            for k, v in value.items():
                if isinstance(v, bool) and not _takes_bool(item):
                    raise ValueError(f"'{name}.{k}' must be a number, not a boolean ({str(v).lower()})")
    return data


def _models_in(annotation: Any) -> tuple[list[Any], bool]:
    """(pydantic model classes inside ``annotation``, whether a mapping wraps them)."""
    import typing

    if hasattr(annotation, "model_fields"):
        return [annotation], False
    origin = typing.get_origin(annotation)
    found: list[Any] = []
    keyed = origin is dict
    for a in typing.get_args(annotation):
        sub, k = _models_in(a)
        found += sub
        keyed = keyed or k
    return found, keyed


def closest_key(model: Any, loc: tuple[Any, ...]) -> str:
    """`` (did you mean 'window'?)`` for an unknown key at ``loc`` (a pydantic error
    location) under ``model``, else ``(choose from ...)`` for a short list, else ''.
    Issue 19: an unknown key is an error everywhere, with the closest valid key."""
    import difflib

    models, keyed = [model], False
    for part in loc[:-1]:
        if isinstance(part, int) or keyed:
            keyed = False
            continue
        nxt: list[Any] = []
        for m in models:
            f = getattr(m, "model_fields", {}).get(part)
            if f is not None:
                sub, keyed = _models_in(f.annotation)
                nxt += sub
        models = nxt
        if not models:
            return ""
    valid = sorted({k for m in models for k in getattr(m, "model_fields", {})})
    if not valid or not loc or not isinstance(loc[-1], str):
        return ""
    close = difflib.get_close_matches(loc[-1], valid, n=1)
    if close:
        return f" (did you mean '{close[0]}'?)"
    return f" (choose from {', '.join(valid)})" if len(valid) <= 12 else ""


def unknown_key(key: Any, valid: Any) -> str:
    """``unknown key (did you mean 'x'?)`` -- or ``(choose from ...)`` -- for ``key``
    outside the ``valid`` keys of a mapping checked by hand."""
    import difflib

    valid = sorted(str(v) for v in valid)
    close = difflib.get_close_matches(str(key), valid, n=1)
    if close:
        return f"unknown key (did you mean '{close[0]}'?)"
    return f"unknown key (choose from {', '.join(valid)})"
