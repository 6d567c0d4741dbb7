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
"""
from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any, Iterable, Optional


from ..errors import InputError

__all__ = ["KINDS", "numeric_leaves", "source_for", "explain_rows", "missing_sources", "load_profile_data"]

KINDS = ("paper", "recording", "calibrated", "assumption")
#: keys whose values are labels, not parameters
_SKIP = frozenset({"kind", "name", "description", "sources", "id", "base_url", "api_key_env"})


def numeric_leaves(data: Any, prefix: str = "") -> Iterable[tuple[str, Any]]:
    """(dotted path, value) of every number in a profile, in file order."""
    if isinstance(data, dict):
        for k, v in data.items():
            if str(k) in _SKIP:
                continue
            yield from numeric_leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(data, (list, tuple)):
        for i, v in enumerate(data):
            yield from numeric_leaves(v, f"{prefix}.{i}")
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        yield prefix, data


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
    from ..files import load_yaml

    p = Path(path)
    data = load_yaml(p, "profile")
    if not isinstance(data, dict):
        raise InputError("a profile is a mapping", file=str(p))
    return data
