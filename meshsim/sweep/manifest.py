"""The sweep folder's ``manifest.json``: what the folder is a sweep of.

It holds the base scenario (raw data after ``--smoke`` and the base ``--set``
overrides), the swept paths, the per-run output level, every point (its id and
values), the skipped points with their reasons, and every run (point id, seed)
ever asked for. It is written atomically before any run starts and rewritten
only to extend it, so a folder killed at any moment still describes itself.

A rerun may change the grid and the seeds (the folder grows: points and runs
are a union), nothing else: :func:`check_compatible` compares the base
scenarios with every swept path masked and names the first difference.

Secrets never reach it (docs/sweeps.md): the base scenario, the points' values
and the ``--set`` echoes are written with secrets removed *by field*
(:mod:`meshsim.core.redact`: URL user-info and query values, header values,
secret-named fields), and bases are compared in that redacted form, so the
manifest a sweep wrote still matches the scenario it was made from. A ``--set``
whose value was removed is listed in ``command.withheld``: resuming with
``--out DIR`` alone asks for it again.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Optional

from ..core.errors import RunFolderError
from ..io.records import write_atomic
from ..core.redact import redact_set, redact_value, structural

__all__ = ["MANIFEST", "FORMAT", "read_manifest", "write_manifest", "check_compatible", "merge", "masked", "public"]

MANIFEST = "manifest.json"
FORMAT = "meshsim-sweep/1"
#: never part of the comparison: seeds are a sweep axis, the others do not change what runs
_ALWAYS_MASKED = ("seed", "seeds", "smoke", "sweep")


def read_manifest(folder: Path) -> Optional[dict[str, Any]]:
    f = Path(folder) / MANIFEST
    if not f.is_file():
        return None
    try:
        m = json.loads(f.read_text(encoding="utf-8"))
    except (ValueError, RecursionError):
        raise RunFolderError("manifest.json is not valid JSON (cut short, or not written by meshsim sweep?)",
                             file=str(f)) from None
    except OSError as exc:
        raise RunFolderError(f"cannot read: {exc.strerror or exc}", file=str(f)) from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise RunFolderError(f"not a {FORMAT} manifest", file=str(f))
    return checked(m, f)


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(v), "a number" if isinstance(v, (int, float)) else type(v).__name__)


def checked(m: dict[str, Any], f: Path) -> dict[str, Any]:
    """``m`` with every field the sweep reads of the type it needs (else one
    line naming the field, exit 2: a damaged or hand-edited manifest), and
    its lists without repeats (a run listed twice is one run: results.csv
    gets one row for it). Issue 30."""

    def bad(field: str, what: str, *value: Any) -> RunFolderError:
        kind = f" {_kind(value[0])}" if value else ""
        return RunFolderError(f"damaged manifest: {what}{kind} (restore the file, or sweep into "
                              "another --out)", file=str(f), field=field)

    want = {"base": dict, "axes": list, "output": str, "points": dict, "runs": list}
    for key, typ in want.items():
        if key not in m:
            raise bad(key, "is missing")
        if not isinstance(m[key], typ):
            raise bad(key, f"must be {_kind(typ())}, not", m[key])
    for key in ("scenario", "command", "search"):
        if m.get(key) is not None and not isinstance(m[key], dict):
            raise bad(key, "must be an object, not", m[key])
    if not isinstance(m.get("skipped", []), list):
        raise bad("skipped", "must be a list, not", m["skipped"])
    for i, a in enumerate(m["axes"]):
        if not isinstance(a, str):
            raise bad(f"axes.{i}", "must be a path (a string), not", a)
    for k, v in m["points"].items():
        if not isinstance(v, dict):
            raise bad(f"points.{k}", "must be an object (path: value), not", v)
    runs, seen = [], set()
    for i, r in enumerate(m["runs"]):
        if not (isinstance(r, list) and len(r) == 2 and isinstance(r[0], str) and isinstance(r[1], int)
                and not isinstance(r[1], bool)):
            raise bad(f"runs.{i}", f"must be [point, integer seed], not {_short(r)}")
        if r[0] not in m["points"]:
            raise bad(f"runs.{i}", f"names point {r[0]!r}, which points does not list")
        if (r[0], r[1]) not in seen:
            seen.add((r[0], r[1]))
            runs.append(r)
    m["runs"] = runs
    skipped, keys = [], set()
    for i, s in enumerate(m.get("skipped") or []):
        if not isinstance(s, dict) or not isinstance(s.get("values"), dict):
            raise bad(f"skipped.{i}", f"must be {{values: ..., reason: ...}}, not {_short(s)}")
        k = json.dumps(s["values"], sort_keys=True, default=str)
        if k not in keys:
            keys.add(k)
            skipped.append(s)
    m["skipped"] = skipped
    m["axes"] = list(dict.fromkeys(m["axes"]))
    cmd = m.get("command") or {}
    for key in ("grid", "zip", "set"):
        v = cmd.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            raise bad(f"command.{key}", "must be a list of strings, not", v)
    for key in ("path", "output"):  # (command.seeds: parse_seeds judges it, as it judges --seeds)
        if cmd.get(key) is not None and not isinstance(cmd[key], str):
            raise bad(f"command.{key}", "must be a string, not", cmd[key])
    return m


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    m = public(manifest)
    write_atomic(Path(folder) / MANIFEST, json.dumps(m, indent=1, sort_keys=False, default=str) + "\n")


def public(manifest: dict[str, Any]) -> dict[str, Any]:
    """``manifest`` as it is written: secrets removed by field (never by searching text)."""
    m = dict(manifest)
    if "base" in m:
        m["base"] = structural(m["base"])
    if isinstance(m.get("points"), dict):
        m["points"] = {k: {p: redact_value(p, v) for p, v in vals.items()} if isinstance(vals, dict) else vals
                       for k, vals in m["points"].items()}
    if isinstance(m.get("skipped"), list):
        m["skipped"] = [dict(s, values={p: redact_value(p, v) for p, v in s["values"].items()})
                        if isinstance(s, dict) and isinstance(s.get("values"), dict) else s for s in m["skipped"]]
    cmd = m.get("command")
    if isinstance(cmd, dict):
        cmd = dict(cmd)
        withheld = [str(w) for w in cmd.get("withheld") or []]
        for opt in ("set", "grid", "zip"):
            if isinstance(cmd.get(opt), list):
                items = []
                for item in cmd[opt]:
                    text, removed = redact_set(item)
                    items.append(text)
                    if removed:  # --set: its path; --grid / --zip: the option (resuming needs new axes)
                        withheld.append(text.split("=", 1)[0].strip() if opt == "set" else f"--{opt}")
                cmd[opt] = items
        if withheld:
            cmd["withheld"] = list(dict.fromkeys(withheld))
        m["command"] = cmd
    return m


def _delete(data: Any, path: str) -> None:
    from ..core.dotted import delete_path
    from ..scenario.paths import split_path

    delete_path(data, split_path(path, path, "<path>"), fill="<swept>")


def masked(base: Any, paths: list[str]) -> Any:
    data = copy.deepcopy(base)
    if isinstance(data, dict):
        for k in _ALWAYS_MASKED:
            data.pop(k, None)
        b = data.get("backend")
        if isinstance(b, dict) and b.get("overrides") == {}:
            b.pop("overrides")
    for p in paths:
        _delete(data, p)
    return data


def _first_difference(a: Any, b: Any, prefix: str = "") -> Optional[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            path = f"{prefix}.{k}" if prefix else str(k)
            x, y = a.get(k, _UNSET), b.get(k, _UNSET)
            if x is _UNSET and isinstance(y, dict):
                x = {}  # name the leaf that was added, not the mapping holding it
            if y is _UNSET and isinstance(x, dict):
                y = {}
            if x is _UNSET or y is _UNSET:
                return path, x, y
            d = _first_difference(x, y, path)
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            d = _first_difference(x, y, f"{prefix}.{i}")
            if d:
                return d
        return None
    return None if a == b else (prefix or "<scenario>", a, b)


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET = _Unset()


def _short(v: Any) -> str:
    if v is _UNSET:
        return "unset"
    text = json.dumps(v, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def check_compatible(old: dict[str, Any], new: dict[str, Any], folder: Path) -> None:
    """Refuse (one line) a rerun that changes anything but the grid and the seeds."""
    where = str(Path(folder) / MANIFEST)
    if "search" in old and "search" not in new:
        raise RunFolderError("the folder holds a search (meshsim sweep --search optuna), not a grid; rerun the "
                             "search or use another --out", file=where)
    if old.get("output") != new.get("output"):
        raise RunFolderError(f"the folder keeps output level '{old.get('output')}', this sweep asks for "
                             f"'{new.get('output')}'; use the same output level or another --out", file=where)
    paths = list(dict.fromkeys(list(old.get("axes", [])) + list(new.get("axes", []))))
    # both as written (secrets removed by field): a manifest matches the scenario it was made from
    d = _first_difference(masked(structural(old["base"]), paths), masked(structural(new["base"]), paths))
    if d is not None:
        path, a, b = d
        raise RunFolderError(f"the folder holds a sweep of a different scenario: {path} is {_short(a)} there and "
                             f"{_short(b)} here (only the grid and the seeds may change; use another --out)",
                             file=where)


def merge(old: Optional[dict[str, Any]], new: dict[str, Any]) -> dict[str, Any]:
    """The union of two manifests of compatible sweeps (``new``'s base and name win)."""
    if old is None:
        return new
    out = dict(new)
    out["axes"] = list(dict.fromkeys(list(old["axes"]) + list(new["axes"])))
    points = {k: dict(v) for k, v in old["points"].items()}
    for k, v in new["points"].items():
        points.setdefault(k, {}).update(v)
    out["points"] = points
    skipped = {json.dumps(s["values"], sort_keys=True, default=str): s for s in old.get("skipped", [])}
    for s in new.get("skipped", []):
        skipped[json.dumps(s["values"], sort_keys=True, default=str)] = s
    out["skipped"] = list(skipped.values())
    runs = [tuple(r) for r in old["runs"]]
    seen = set(runs)
    for r in new["runs"]:
        if tuple(r) not in seen:
            runs.append(tuple(r))
            seen.add(tuple(r))
    out["runs"] = [list(r) for r in runs]
    return out
