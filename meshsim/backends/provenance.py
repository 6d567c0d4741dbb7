"""Where every number in a backend profile comes from (``meshsim backends explain``).

A profile's ``sources:`` block maps dotted paths of its numbers to a source
string ``"<kind>: <text>"``. A path may end in ``*`` (``review.strong.*``) or
use ``*`` for one level (``accuracy.*.guess``); the most specific match wins.
List items are addressed by index (``committee.round2.0``) or covered by
their list's path. Kinds:

* ``paper`` — a table, section or quoted sentence of a paper, and how the
  number follows from it;
* ``recording`` — fitted from a cassette of real calls (``backends fit``);
* ``calibrated`` — set by ``meshsim backends calibrate`` so that a
  *mechanism-level* statistic (App. C.5's review and Takeover audit, a
  model's accuracy) matches its measured value; never a protocol-level outcome;
* ``assumption`` — no measurement exists; the text says why this value.

Protocol-level results (accuracy per phase, detection delay, isolation
counts, BFTI, H-Majority) are never a source: they are what the simulator
predicts.

Every ``assumption`` also has a plausible range (``ranges:``, same path
patterns as ``sources:``), one entry per *factor* of ``meshsim uncertainty``::

    ranges:
      review.noise: {low: 0.02, high: 0.15, why: "<why the ends are there>"}
      tokens: {scale: [0.7, 1.4], why: "..."}   # every covered number x one factor

A factor at position ``u`` in [0, 1] sets each number it covers to
``low + u (high - low)`` (``scale``: the number times ``lo + u (hi - lo)``);
integers are rounded. Numbers covered by one entry move together.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional


from ..core.dotted import leaves
from ..core.errors import InputError

__all__ = ["KINDS", "numeric_leaves", "source_for", "explain_rows", "missing_sources", "load_profile_data",
           "Factor", "assumption_factors", "factor_overrides", "range_for"]

KINDS = ("paper", "recording", "calibrated", "assumption")
#: keys whose values are labels, not parameters
_SKIP = frozenset({"kind", "name", "description", "sources", "ranges", "id", "base_url", "api_key_env"})


def numeric_leaves(data: Any, prefix: str = "") -> Iterable[tuple[str, Any]]:
    """(dotted path, value) of every number in a profile, in file order."""
    return ((p, v) for p, v in leaves(data, lists=True, skip=_SKIP, prefix=prefix)
            if isinstance(v, (int, float)) and not isinstance(v, bool))


def _specificity(pattern: str) -> tuple[int, int]:
    return (pattern.count(".") - pattern.count("*"), len(pattern) - pattern.count("*"))


def source_for(path: str, sources: dict[str, str]) -> Optional[tuple[str, str]]:
    """(matching pattern, source) for ``path``; a list item inherits its list's source."""
    best: Optional[tuple[str, str]] = None
    for pat, src in sources.items():
        pat = str(pat)
        hit = (pat == path or path.startswith(pat + ".")
               or ("*" in pat and (fnmatch.fnmatchcase(path, pat) or fnmatch.fnmatchcase(path, pat + ".*"))))
        if hit and (best is None or _specificity(pat) > _specificity(best[0])):
            best = (pat, str(src))
    return best


def kind_of(source: str) -> str:
    head = source.split(":", 1)[0].strip().lower()
    return head if head in KINDS else "?"


def explain_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    sources = data.get("sources") or {}
    rows = []
    for path, value in numeric_leaves(data):
        got = source_for(path, sources)
        src = got[1] if got else ""
        rows.append({"path": path, "value": value, "kind": kind_of(src) if src else "missing",
                     "source": src.split(":", 1)[1].strip() if ":" in src else src})
    return rows


def missing_sources(data: dict[str, Any]) -> list[str]:
    """Numbers without a source, and sources of an unknown kind."""
    return [r["path"] for r in explain_rows(data) if r["kind"] in ("missing", "?")]


def load_profile_data(path: str | Path) -> dict[str, Any]:
    from ..core.files import load_yaml

    p = Path(path)
    data = load_yaml(p, "profile")
    if not isinstance(data, dict):
        raise InputError("a profile is a mapping", file=str(p))
    return data


# ------------------------------------------------------------------------------ assumption ranges


@dataclass(frozen=True)
class Factor:
    """One ``ranges:`` entry: the numbers it covers and where each goes at u = 0 and u = 1."""

    name: str  # the ranges: key (a path or pattern)
    why: str
    leaves: tuple[tuple[str, float, float, float, bool], ...]  # (path, value, at u=0, at u=1, is int)
    scale: Optional[tuple[float, float]] = None

    @property
    def low(self) -> float:
        return self.leaves[0][2] if self.scale is None else self.scale[0]

    @property
    def high(self) -> float:
        return self.leaves[0][3] if self.scale is None else self.scale[1]

    def values(self, u: float) -> dict[str, Any]:
        """Each covered path's value at position ``u`` in [0, 1] of the range."""
        out: dict[str, Any] = {}
        for path, _v, lo, hi, is_int in self.leaves:
            x = lo + u * (hi - lo)
            out[path] = int(round(x)) if is_int else float(x)
        return out


def _range_spec(key: str, spec: Any, src: str) -> tuple[Optional[tuple[float, float]], Optional[tuple[float, float]], str]:
    """(absolute (low, high) or None, scale (lo, hi) or None, why) of one ``ranges:`` entry."""
    def num(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and abs(x) != float("inf")

    if not isinstance(spec, dict):
        raise InputError("a range is {low, high, why} or {scale: [lo, hi], why}", file=src,
                         field=f"ranges.{key}", value=spec)
    why = spec.get("why")
    if not isinstance(why, str) or not why.strip():
        raise InputError("a range needs 'why': the reason for its ends", file=src, field=f"ranges.{key}.why",
                         value=why)
    unknown = set(spec) - {"low", "high", "scale", "why"}
    if unknown:
        from ..core.types import unknown_key

        raise InputError(unknown_key(sorted(unknown)[0], ("low", "high", "scale", "why")), file=src,
                         field=f"ranges.{key}.{sorted(unknown)[0]}")
    if "scale" in spec:
        sc = spec["scale"]
        if not (isinstance(sc, list) and len(sc) == 2 and all(num(x) for x in sc) and 0 <= sc[0] <= sc[1]):
            raise InputError("scale must be [lo, hi] with 0 <= lo <= hi", file=src, field=f"ranges.{key}.scale",
                             value=sc)
        return None, (float(sc[0]), float(sc[1])), why.strip()
    lo: Any
    hi: Any
    lo, hi = spec.get("low"), spec.get("high")
    if not (num(lo) and num(hi) and lo <= hi):
        raise InputError("low and high must be finite numbers with low <= high", file=src,
                         field=f"ranges.{key}", value=[lo, hi])
    return (float(lo), float(hi)), None, why.strip()


def _covers(pattern: str, path: str) -> bool:
    return (pattern == path or path.startswith(pattern + ".")
            or ("*" in pattern and (fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(path, pattern + ".*"))))


def range_for(path: str, data: dict[str, Any]) -> Optional[tuple[str, Any]]:
    """(ranges: key, spec) covering ``path`` (the most specific), or None."""
    best = None
    for pat, spec in (data.get("ranges") or {}).items():
        if _covers(str(pat), path) and (best is None or _specificity(str(pat)) > _specificity(best[0])):
            best = (str(pat), spec)
    return best


def assumption_factors(data: dict[str, Any], src: str = "profile") -> list[Factor]:
    """Every ``ranges:`` entry of a profile as a factor, in file order; each number
    belongs to the most specific entry covering it (so a broad ``scale`` entry and
    a specific one can both stand). An entry that covers no number is an error."""
    ranges = data.get("ranges") or {}
    if not isinstance(ranges, dict):
        raise InputError("ranges must be a mapping of path -> range", file=src, field="ranges")
    owned: dict[str, list[tuple[str, Any]]] = {str(k): [] for k in ranges}
    for path, value in numeric_leaves(data):
        got = range_for(path, data)
        if got is not None:
            owned[got[0]].append((path, value))
    out = []
    for key, spec in ranges.items():
        key = str(key)
        absolute, scale, why = _range_spec(key, spec, src)
        leaves = owned[key]
        if not leaves:
            raise InputError("names no number of the profile", file=src, field=f"ranges.{key}")
        rows = []
        for path, value in leaves:
            is_int = isinstance(value, int)
            # (_range_spec gives one of absolute and scale)
            lo, hi = absolute if absolute is not None else (value * scale[0], value * scale[1])  # type: ignore[index]
            rows.append((path, float(value), lo, hi, is_int))
        out.append(Factor(key, why, tuple(rows), scale))
    return out


def factor_overrides(factors: list[Factor], positions: dict[str, float]) -> dict[str, Any]:
    """``backend.overrides`` (dotted profile path -> value) for factors at ``positions``
    (factor name -> u in [0, 1]); factors not named keep the profile's values."""
    out: dict[str, Any] = {}
    by_name = {f.name: f for f in factors}
    for name, u in positions.items():
        if name not in by_name:
            raise InputError("no such assumption factor", field=name)
        if not 0.0 <= u <= 1.0:
            raise InputError("a factor position is in [0, 1]", field=name, value=u)
        out.update(by_name[name].values(u))
    return out
