"""Slices of a sweep's points (docs/sweeps.md#statistics-per-point).

- ``--where PATH=VALUE`` (plots and the report) keeps the points at that value
  of a swept parameter: :func:`parse_fixes` checks the path and the value
  against the folder, :func:`select` filters rows.
- ``--reference PATH=VALUE,...`` names the point every other point is
  compared with (paired differences on shared seeds, :mod:`.stats`).
  :func:`reference_points` maps each point to its reference: the reference
  values on the named axes, the point's own value on every other axis (so a
  partial reference such as ``window=8`` compares each point with the point of
  window 8 that shares its other values). :func:`default_reference` is the
  rule without ``--reference``: the base scenario's own value of every swept
  parameter whose base value is one of its grid values.

Swept values are matched as numbers when both are numbers (``2`` is ``2.0``),
else as equal data.
"""
from __future__ import annotations

import difflib
import json
import math
import re
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from ..core.errors import InputError

__all__ = ["same_value", "resolve_axis", "split_assignments", "parse_fixes", "select", "point_values",
           "reference_points", "base_values", "default_reference", "describe"]

_MISSING = object()
#: a comma starts a new assignment only when a ``NAME=`` follows it (values may hold commas: ``[1, 2]``)
_SPLIT = re.compile(r",\s*(?=[A-Za-z_][\w.\-]*\s*=)")


def same_value(a: Any, b: Any) -> bool:
    """Swept values equal as the grid means them: numbers by value, others as data."""
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)
    return a == b


def resolve_axis(name: str, axes: Sequence[str], field: str) -> str:
    """``name`` as a swept path: exact, or the one path ending in ``.name``."""
    if name in axes:
        return name
    hits = [a for a in axes if a.endswith("." + name)]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise InputError(f"ambiguous: {', '.join(hits)}", field=field, value=name)
    near = difflib.get_close_matches(name, list(axes), n=3, cutoff=0.4) or list(axes)[:4]
    raise InputError(f"not a swept parameter of this sweep (swept: {', '.join(near)})", field=field, value=name)


def split_assignments(items: Iterable[str] | str | None) -> list[str]:
    """``["a=1,b=2", "c=[1, 2]"]`` -> ``["a=1", "b=2", "c=[1, 2]"]``."""
    if items is None:
        return []
    if isinstance(items, str):
        items = [items]
    out: list[str] = []
    for text in items:
        out.extend(p.strip() for p in _SPLIT.split(str(text)) if p.strip())
    return out


def _parse_value(text: str) -> Any:
    from ..core.files import parse_value

    return parse_value(text, "--where")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return json.dumps(v, default=str) if isinstance(v, (dict, list)) else str(v)


def parse_fixes(items: Iterable[str] | str | Mapping[str, Any] | None, axes: Sequence[str],
                values_of: Callable[[str], Sequence[Any]], field: str = "--where") -> dict[str, Any]:
    """``PATH=VALUE`` items (repeatable or comma-separated) as ``{path: value}``.

    The path may be a unique last component (``alpha``); the value must be one
    the sweep holds for that path (returned as the table holds it). Anything
    else is an :class:`InputError` naming ``field`` and the item."""
    if isinstance(items, Mapping):
        items = [f"{k}={json.dumps(v) if isinstance(v, (dict, list)) else v}" for k, v in items.items()]
    out: dict[str, Any] = {}
    for text in split_assignments(items):
        name, eq, raw = text.partition("=")
        if not eq or not name.strip():
            raise InputError("expected PATH=VALUE", field=field, value=text)
        path = resolve_axis(name.strip(), axes, field)
        if path in out:
            raise InputError(f"{path} given twice", field=field, value=text)
        want = _parse_value(raw.strip())
        present = list(values_of(path))
        hit = next((v for v in present if same_value(v, want)), _MISSING)
        if hit is _MISSING and isinstance(want, str):  # a string column: compare the text
            hit = next((v for v in present if _fmt(v) == want), _MISSING)
        if hit is _MISSING:
            shown = ", ".join(_fmt(v) for v in present[:12]) + (", …" if len(present) > 12 else "")
            raise InputError(f"no point of the sweep has {path} = {raw.strip()} (its values: {shown})",
                             field=field, value=text)
        out[path] = hit
    return out


def select(rows: Iterable[dict[str, Any]], fixes: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows at every fixed value."""
    return [r for r in rows if all(same_value(r.get(p), v) for p, v in fixes.items())]


def point_values(rows: Iterable[dict[str, Any]], axes: Sequence[str]) -> dict[str, dict[str, Any]]:
    """point id -> its swept values, in row order."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        out.setdefault(r["point"], {a: r.get(a) for a in axes})
    return out


def reference_points(points: Mapping[str, Mapping[str, Any]], axes: Sequence[str],
                     reference: Mapping[str, Any]) -> dict[str, Optional[str]]:
    """Each point's reference point: ``reference``'s value on the axes it names,
    the point's own elsewhere; None when no point has those values."""
    if not reference:
        return {p: None for p in points}
    out: dict[str, Optional[str]] = {}
    for p, vals in points.items():
        target = {a: reference[a] if a in reference else vals.get(a) for a in axes}
        out[p] = next((q for q, qv in points.items()
                       if all(same_value(qv.get(a), target[a]) for a in axes)), None)
    return out


def base_values(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The base scenario's value of every swept path (its defaults filled in
    when the scenario still parses here; else the values the file sets)."""
    from ..scenario.model import get_path

    base = manifest.get("base") or {}
    axes = list(manifest.get("axes", []))
    data: Any = base
    try:
        import copy
        from pathlib import Path

        from ..simulate.runner import portable_data
        from ..scenario.model import parse_scenario

        src = str((manifest.get("scenario") or {}).get("source") or "<scenario>")
        data = portable_data(parse_scenario(copy.deepcopy(base), src, Path(src).parent))
    except Exception:  # a moved tasks file, another version: the raw values still name most axes
        data = base
    out = {}
    for a in axes:
        v = get_path(data, a, _MISSING)
        if v is _MISSING and data is not base:
            v = get_path(base, a, _MISSING)
        if v is not _MISSING:
            out[a] = v
    return out


def default_reference(manifest: Mapping[str, Any], points: Optional[Mapping[str, Mapping[str, Any]]] = None
                      ) -> dict[str, Any]:
    """The reference without ``--reference``: the base scenario's value of each
    swept parameter whose base value is one of the grid's values for it."""
    points = points if points is not None else manifest.get("points", {})
    out = {}
    for a, v in base_values(manifest).items():
        hit = next((pv[a] for pv in points.values() if a in pv and same_value(pv[a], v)), _MISSING)
        if hit is not _MISSING:
            out[a] = hit
    return out


def describe(fixes: Mapping[str, Any], names: Optional[Mapping[str, str]] = None) -> str:
    names = names or {}
    return " ".join(f"{names.get(p, p)}={_fmt(v)}" for p, v in fixes.items())
