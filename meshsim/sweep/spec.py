"""Sweep specs: the axes (a cartesian ``grid`` and ``zip`` groups), the seeds,
base overrides and the per-run output level, from a scenario's ``sweep:``
section, a separate sweep file or the command line (docs/sweeps.md).

Axis values are a YAML list, a comma list (``1.5,2,3``), an inclusive range
``START:STOP:STEP`` (``0.8:2.0:0.2``, computed in decimal so that 1.4 is 1.4)
or a single value. Everything wrong is an :class:`InputError` naming where.
"""
from __future__ import annotations

import difflib
import itertools
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Iterable, Optional

import yaml

from ..core.errors import InputError
from ..core.files import parse_value
from ..scenario.fields import parse_seeds

__all__ = ["Axis", "SweepSpec", "OUTPUT_LEVELS", "parse_values", "parse_axis_arg", "spec_from_section",
           "read_sweep_file", "MAX_VALUES", "MAX_POINTS", "MAX_RUNS"]

#: what each run of a sweep keeps: ``summary`` (summary.json and
#: scenario.resolved.yaml), ``records`` (also every per-record table but
#: reviews), ``full`` (everything ``meshsim run`` writes)
OUTPUT_LEVELS = ("summary", "records", "full")
#: values one range may expand to
MAX_VALUES = 10_000
#: points one grid may hold (the product of its axes' lengths), checked from the
#: axes before any point is built: validate and --dry-run check every point
MAX_POINTS = 10_000
#: runs one sweep may hold (points x seeds), checked before any point is built
MAX_RUNS = 1_000_000
#: paths a grid cannot sweep (seeds are their own axis)
RESERVED = ("seed", "seeds", "sweep", "smoke")
SECTION_KEYS = ("grid", "zip", "seeds", "set", "output", "smoke")


@dataclass(frozen=True)
class Axis:
    """One dimension of the grid: a single path, or several zipped paths that
    take their values together (``values[i]`` holds one value per path)."""

    paths: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]


@dataclass
class SweepSpec:
    axes: list[Axis] = field(default_factory=list)
    #: None: the scenario's own seeds; else a count or a list (as ``seeds:``)
    seeds: Any = None
    #: base overrides ``PATH=VALUE`` applied to the scenario before any point
    sets: list[str] = field(default_factory=list)
    output: str = "summary"

    @property
    def paths(self) -> list[str]:
        return [p for a in self.axes for p in a.paths]

    def points(self) -> list[dict[str, Any]]:
        """Every point of the grid ({path: value}), axes varying last-fastest."""
        out = []
        for combo in itertools.product(*(a.values for a in self.axes)):
            pt: dict[str, Any] = {}
            for axis, vals in zip(self.axes, combo):
                pt.update(zip(axis.paths, vals))
            out.append(pt)
        return out


# ----------------------------------------------------------------------------------- values


def _scalar(text: str) -> Any:
    return parse_value(text, "--grid")


def _range(text: str, where: dict[str, Any]) -> list[Any]:
    parts = [p.strip() for p in text.split(":")]
    if len(parts) != 3 or not all(parts):
        raise InputError("malformed range: expected START:STOP:STEP, e.g. 0.8:2.0:0.2", **where)
    try:
        start, stop, step = (Decimal(p) for p in parts)
    except InvalidOperation:
        raise InputError("malformed range: START, STOP and STEP must be numbers", **where) from None
    if not all(x.is_finite() for x in (start, stop, step)):
        raise InputError("malformed range: START, STOP and STEP must be finite numbers", **where)
    if step <= 0:
        raise InputError("malformed range: STEP must be > 0", **where)
    if stop < start:
        raise InputError("malformed range: STOP is below START", **where)
    n = int((stop - start) / step) + 1
    if n > MAX_VALUES:
        raise InputError(f"range expands to {n} values (at most {MAX_VALUES})", **where)
    ints = all(x == x.to_integral_value() and "." not in p and "e" not in p.lower()
               for x, p in zip((start, stop, step), parts))
    vals = [start + k * step for k in range(n)]
    return [int(v) for v in vals] if ints else [float(v) for v in vals]


def parse_values(raw: Any, where: dict[str, Any]) -> list[Any]:
    """An axis's values from a YAML value or a command-line text (see the module doc)."""
    if isinstance(raw, (list, tuple)):
        vals = list(raw)
    elif isinstance(raw, dict):
        raise InputError("expected a list of values or a range START:STOP:STEP, not a mapping", **where)
    elif isinstance(raw, str):
        text = raw.strip()
        if text.startswith("["):
            parsed = parse_value(text, str(where.get("file") or where.get("field") or "--grid"),
                                 where.get("field") if where.get("file") else None)
            if not isinstance(parsed, list):
                raise InputError("malformed list of values", **where)
            vals = parsed
        elif ":" in text and "," not in text:
            vals = _range(text, where)
        elif "," in text:
            items = [x.strip() for x in text.split(",")]
            if items and items[-1] == "":
                items = items[:-1]
            if any(x == "" for x in items):
                raise InputError("empty value in a comma list", **where)
            vals = [_scalar(x) for x in items]
        elif text == "":
            vals = []
        else:
            vals = [_scalar(text)]
    elif raw is None:
        vals = []
    else:
        vals = [raw]
    if not vals:
        raise InputError("empty grid: the axis has no values", **where)
    if len(vals) > MAX_VALUES:
        raise InputError(f"{len(vals)} values (at most {MAX_VALUES})", **where)
    return vals


def check_path(path: Any, where: dict[str, Any]) -> str:
    if not isinstance(path, str) or not path.strip() or any(not p for p in path.strip().split(".")):
        raise InputError("expected a dotted scenario path such as protocol.params.alpha", **where)
    path = path.strip()
    if path.split(".")[0] in RESERVED:
        if path.split(".")[0] in ("seed", "seeds"):
            raise InputError("seeds are their own axis: use --seeds (or sweep.seeds) instead", **where)
        raise InputError(f"'{path.split('.')[0]}' cannot be swept", **where)
    return path


def parse_axis_arg(item: str, option: str) -> tuple[str, list[Any]]:
    """``PATH=VALUES`` of ``--grid`` / ``--zip``."""
    where = {"field": option, "value": item}
    if "=" not in item:
        raise InputError("expected PATH=VALUES, e.g. protocol.params.alpha=0.8:2.0:0.2", **where)
    path, raw = item.split("=", 1)
    return check_path(path, where), parse_values(raw, where)


def _zip_axis(group: dict[str, list[Any]], where: dict[str, Any]) -> Axis:
    lengths = {p: len(v) for p, v in group.items()}
    if len(set(lengths.values())) > 1:
        raise InputError("zipped axes must have the same number of values ("
                         + ", ".join(f"{p}: {n}" for p, n in lengths.items()) + ")", **where)
    return Axis(tuple(group), tuple(zip(*group.values())))


def build_spec(grid: Iterable[tuple[str, list[Any]]], zips: Iterable[dict[str, list[Any]]], seeds: Any,
               sets: list[str], output: Optional[str], where_grid: dict[str, Any],
               output_field: str = "--output") -> SweepSpec:
    axes: list[Axis] = []
    seen: set[str] = set()

    def claim(path: str) -> None:
        if path in seen:
            raise InputError("the same path is swept twice", **{**where_grid, "value": path})
        seen.add(path)

    for path, vals in grid:
        claim(path)
        axes.append(Axis((path,), tuple((v,) for v in vals)))
    for group in zips:
        if not group:
            continue
        for path in group:
            claim(path)
        axes.append(_zip_axis(group, where_grid))
    product = 1
    for axis in axes:  # budget before work: the product, never the points (issue 19)
        product *= len(axis.values)
        if product > MAX_POINTS:
            sizes = " x ".join(str(len(a.values)) for a in axes)
            raise InputError(f"the grid holds {sizes} points, more than {MAX_POINTS:,} (sweep the axes in "
                             "separate sweeps, or coarser)", **where_grid)
    level = output or "summary"
    if level not in OUTPUT_LEVELS:
        raise InputError(f"unknown output level; choose one of {', '.join(OUTPUT_LEVELS)}",
                         field=output_field, value=level)
    return SweepSpec(axes=axes, seeds=seeds, sets=list(sets), output=level)


# ----------------------------------------------------------------------------------- files


def _seeds(raw: Any, where: dict[str, Any]) -> Any:
    try:
        return parse_seeds(raw)
    except ValueError as exc:
        raise InputError(str(exc), **where) from None


def _sets(raw: Any, where: dict[str, Any]) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, dict):
        return [f"{k}={yaml.safe_dump(v, default_flow_style=True, width=10**9).strip()}"
                for k, v in raw.items()]
    if isinstance(raw, list) and all(isinstance(x, str) and "=" in x for x in raw):
        return list(raw)
    raise InputError("expected a mapping PATH: VALUE (or a list of 'PATH=VALUE')", **where)


def spec_from_section(section: Any, source: str, smoke: bool = False, prefix: str = "sweep") -> SweepSpec:
    """A :class:`SweepSpec` from a ``sweep:`` section (``smoke``: apply its ``smoke`` keys)."""
    if not isinstance(section, dict):
        raise InputError("must be a mapping with grid, zip, seeds, set, output", file=source, field=prefix,
                         value=section)
    for k in section:
        if k not in SECTION_KEYS:
            close = difflib.get_close_matches(str(k), SECTION_KEYS, n=1)
            raise InputError(f"unknown key ({f'did you mean {close[0]!r}? ' if close else ''}choose from "
                             f"{', '.join(SECTION_KEYS)})", file=source, field=f"{prefix}.{k}")
    section = dict(section)
    small = section.pop("smoke", None)
    if smoke and small:
        if not isinstance(small, dict) or any(k not in SECTION_KEYS or k == "smoke" for k in small):
            raise InputError("must be a mapping of sweep keys (grid, zip, seeds, set, output) to replace",
                             file=source, field=f"{prefix}.smoke", value=small)
        section.update(small)
    grid_raw = section.get("grid") or {}
    if not isinstance(grid_raw, dict):
        raise InputError("must be a mapping PATH: VALUES", file=source, field=f"{prefix}.grid", value=grid_raw)
    grid = []
    for path, raw in grid_raw.items():
        where = {"file": source, "field": f"{prefix}.grid.{path}"}
        grid.append((check_path(path, where), parse_values(raw, where)))
    zraw = section.get("zip") or []
    if isinstance(zraw, dict):
        zraw = [zraw]
    if not isinstance(zraw, list):
        raise InputError("must be a list of mappings PATH: VALUES (each mapping is one zipped group)",
                         file=source, field=f"{prefix}.zip", value=zraw)
    zips = []
    for i, group in enumerate(zraw):
        if not isinstance(group, dict):
            raise InputError("must be a mapping PATH: VALUES", file=source, field=f"{prefix}.zip[{i}]", value=group)
        g = {}
        for path, raw in group.items():
            where = {"file": source, "field": f"{prefix}.zip[{i}].{path}"}
            g[check_path(path, where)] = parse_values(raw, where)
        zips.append(g)
    seeds = section.get("seeds")
    if seeds is not None:
        seeds = _seeds(seeds, {"file": source, "field": f"{prefix}.seeds", "value": seeds})
    sets = _sets(section.get("set"), {"file": source, "field": f"{prefix}.set", "value": section.get("set")})
    output = section.get("output")
    if output is not None and output not in OUTPUT_LEVELS:
        raise InputError(f"unknown output level; choose one of {', '.join(OUTPUT_LEVELS)}", file=source,
                         field=f"{prefix}.output", value=output)
    return build_spec(grid, zips, seeds, sets, output, {"file": source, "field": f"{prefix}.grid"})


def read_sweep_file(path: Path) -> tuple[Path, Any, Optional[dict], str]:
    """``(scenario path, raw scenario data, sweep section, file of the section)``
    of a scenario file (its ``sweep:`` section, if any) or of a separate sweep
    file (``scenario: PATH`` relative to it, plus ``sweep:``)."""
    from ..scenario.model import read_scenario_data

    data = read_scenario_data(path)
    if isinstance(data, dict) and "scenario" in data and "network" not in data:
        for k in data:
            if k not in ("scenario", "sweep", "description"):
                raise InputError("unknown key in a sweep file (scenario, sweep, description)", file=str(path),
                                 field=k)
        ref = data["scenario"]
        if not isinstance(ref, str) or not ref:
            raise InputError("must name the scenario file (relative to this file)", file=str(path),
                             field="scenario", value=ref)
        scen = Path(ref) if Path(ref).is_absolute() else path.parent / ref
        if not scen.is_file():
            raise InputError("scenario file not found", file=str(path), field="scenario", value=ref)
        sdata = read_scenario_data(scen)
        section = data.get("sweep")
        if section is None:
            raise InputError("a sweep file needs a 'sweep' section", file=str(path), field="sweep")
        return scen, sdata, section, str(path)
    section = data.get("sweep") if isinstance(data, dict) else None
    return path, data, section, str(path)
