"""Load and check a scenario file: YAML -> raw data (with ``smoke`` and ``--set``
overrides) -> the validated :class:`~meshsim.scenario.document.Scenario`, with the
checks that need no graph, and the files a run reads besides the scenario.

Unknown keys, wrong types and impossible values are errors that name the file,
the field path and the value (``InputError``), never a traceback. Events and
protocol parameters are validated against their registries."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ..core.errors import InputError, ScenarioError
from ..core.files import check_numbers, load_yaml
from .document import Scenario, over_limit
from .events import EVENT_TYPES
from .fields import MAX_SEED
from .paths import apply_overrides

__all__ = ["parse_scenario", "read_scenario_data", "scenario_data", "load_scenario", "smoke_overrides",
           "input_files"]


def _fmt_loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _from_validation(exc: ValidationError, source: str, prefix: tuple = (), model: Any = None) -> ScenarioError:
    from ..core.types import closest_key

    errs = exc.errors(include_url=False)
    # an unknown key first: a misspelt key also makes its field "missing", and the typo is the cause
    first = next((e for e in errs if e["type"] == "extra_forbidden"), errs[0])
    loc = tuple(p for p in prefix + tuple(first["loc"])
                if not (isinstance(p, str) and ("function-" in p or p in ("list[str]",))))
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        own = tuple(p for p in first["loc"] if not (isinstance(p, str) and "function-" in p))
        msg = "unknown key" + closest_key(model or Scenario, own)
    elif first["type"] == "missing":
        msg = "missing required field"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    if msg.startswith("Assertion failed, "):
        msg = msg[len("Assertion failed, "):]
    more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
    value = first.get("input", InputError._MISSING) if first["type"] != "missing" else InputError._MISSING
    if first["type"] == "extra_forbidden":
        value = InputError._MISSING
    if isinstance(value, dict) and len(repr(value)) > 80:
        value = InputError._MISSING
    return ScenarioError(msg + more, file=source, field=_fmt_loc(loc) or None, value=value)


def _resolve_events(raw_events: Any, source: str) -> Any:
    if not isinstance(raw_events, list):
        return raw_events  # let pydantic report the type error
    out = []
    for i, ev in enumerate(raw_events):
        if not isinstance(ev, dict):
            raise ScenarioError("each event must be a mapping", file=source, field=f"events[{i}]", value=ev)
        kind = ev.get("type")
        cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise ScenarioError(f"unknown event type; choose one of {sorted(EVENT_TYPES)}", file=source,
                                field=f"events[{i}].type", value=kind)
        try:
            out.append(cls.model_validate(ev))
        except ValidationError as exc:
            raise _from_validation(exc, source, ("events", i), cls) from None
    return out


def _resolve_protocol(raw: Any, source: str) -> Any:
    from ..protocols import PROTOCOLS

    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        return raw
    raw = dict(raw)
    name = raw.get("name", "routing")
    cls = PROTOCOLS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ScenarioError(f"unknown protocol; choose one of {sorted(PROTOCOLS)}", file=source,
                            field="protocol.name", value=name)
    params = raw.get("params") or {}
    if isinstance(params, BaseModel):
        return raw
    if not isinstance(params, dict):
        raise ScenarioError("must be a mapping", file=source, field="protocol.params", value=params)
    try:
        raw["params"] = cls.Params.model_validate(params)
    except ValidationError as exc:
        raise _from_validation(exc, source, ("protocol", "params"), cls.Params) from None
    return raw


def parse_scenario(data: Any, source: str = "<scenario>", base_dir: Path | None = None) -> Scenario:
    """Validate raw scenario data (already parsed from YAML)."""
    if not isinstance(data, dict):
        raise ScenarioError("a scenario must be a YAML mapping", file=source, value=type(data).__name__)
    try:
        check_numbers(data, source)  # finite, 64-bit: before any model sees a number
    except InputError as exc:
        raise ScenarioError(exc.message, file=exc.file, field=exc.field, value=exc.value) from None
    data = dict(data)
    if "events" in data and data["events"] is not None:
        data["events"] = _resolve_events(data["events"], source)
    elif "events" in data:
        data["events"] = []
    if "protocol" in data or True:
        data["protocol"] = _resolve_protocol(data.get("protocol"), source)
    try:
        sc = Scenario.model_validate(data)
    except ValidationError as exc:
        raise _from_validation(exc, source) from None
    sc._source = source
    sc._base_dir = base_dir
    _check_static(sc)
    return sc


def read_scenario_data(path: str | Path) -> Any:
    """A scenario file's raw data (YAML parsed, nothing validated yet)."""
    path = Path(path)
    source = str(path)
    try:
        data = load_yaml(path, "scenario")
    except InputError as exc:
        raise ScenarioError(exc.message, file=exc.file, field=exc.field, value=exc.value) from None
    if data is None:
        raise ScenarioError("scenario file is empty", file=source)
    return data


def scenario_data(data: Any, source: str, overrides: list[str] | None = None, smoke: bool = False) -> Any:
    """Raw scenario data with the file's ``smoke`` overrides (``smoke``) and then
    ``overrides`` applied, as :func:`load_scenario` validates it."""
    if (overrides or smoke) and not isinstance(data, dict):
        raise ScenarioError("a scenario must be a YAML mapping", file=source)
    if smoke:
        small = data.get("smoke") or {}
        if not isinstance(small, dict):
            raise ScenarioError("must be a mapping of PATH: VALUE", file=source, field="smoke", value=small)
        data = apply_overrides(data, [f"{k}={yaml.safe_dump(v, default_flow_style=True).strip()}"
                                      for k, v in small.items()])
        if isinstance(data.get("smoke"), dict):
            data["smoke"] = {}
    if overrides:
        data = apply_overrides(data, overrides)
    return data


def load_scenario(path: str | Path, overrides: list[str] | None = None, smoke: bool = False) -> Scenario:
    """Load, override and validate a scenario file (static checks only).

    Checks that need the graph (unknown agents, connectivity) run in
    :func:`check_semantics`, which ``meshsim validate`` and every run call.
    """
    path = Path(path)
    data = scenario_data(read_scenario_data(path), str(path), overrides, smoke)
    return parse_scenario(data, str(path), path.parent)


def smoke_overrides(path: str | Path) -> list[str]:
    """A scenario's ``smoke`` block as ``--set`` overrides (``meshsim compare --smoke``)."""
    data = load_yaml(path, "scenario") or {}
    small = data.get("smoke") or {} if isinstance(data, dict) else {}
    if not isinstance(small, dict):
        raise ScenarioError("must be a mapping of PATH: VALUE", file=str(path), field="smoke", value=small)
    return [f"{k}={yaml.safe_dump(v, default_flow_style=True).strip()}" for k, v in small.items()] + ["smoke={}"]


def _check_static(sc: Scenario) -> None:
    src = sc.source
    lim = sc.limits
    n_seeds = len(sc.seeds) if isinstance(sc.seeds, list) else sc.seeds
    if n_seeds > lim.seeds:
        raise ScenarioError(over_limit("seeds", n_seeds, "seeds", lim.seeds), file=src, field="seeds", value=n_seeds)
    if not isinstance(sc.seeds, list) and sc.seed + sc.seeds - 1 > MAX_SEED:
        raise ScenarioError(f"the last seed, seed + seeds - 1, must be <= 2**63-1 ({MAX_SEED})", file=src,
                            field="seeds", value=sc.seeds)
    if sc.duration is not None and sc.duration > lim.duration:
        raise ScenarioError(over_limit("of simulated time", sc.duration, "duration", lim.duration), file=src,
                            field="duration", value=sc.duration)
    if sc.tasks is not None:
        for key in ("count", "block"):
            n = getattr(sc.tasks, key)
            if n is not None and n > lim.tasks:
                raise ScenarioError(over_limit("tasks", n, "tasks", lim.tasks), file=src, field=f"tasks.{key}", value=n)
    if sc.agents.replicas > lim.agents:
        raise ScenarioError(over_limit("replicas", sc.agents.replicas, "agents", lim.agents), file=src,
                            field="agents.replicas", value=sc.agents.replicas)
    for i, ev in enumerate(sc.events):
        if ev.at is not None and ev.at > lim.duration:  # a run without duration would never reach it
            raise ScenarioError(over_limit("event time", ev.at, "duration", lim.duration), file=src,
                                field=f"events[{i}].at", value=ev.at)
        if ev.at is not None and sc.duration is not None and ev.at > sc.duration:
            raise ScenarioError(f"event is after the end of the run (duration {sc.duration:g}s)", file=src,
                                field=f"events[{i}].at", value=ev.at)
        if ev.at_task is not None:
            if sc.tasks is None:
                raise ScenarioError("'at_task' needs a 'tasks' stream", file=src, field=f"events[{i}].at_task",
                                    value=ev.at_task)
            if ev.at_task > sc.tasks.count:
                raise ScenarioError(f"event is after the end of the task stream ({sc.tasks.count} tasks)",
                                    file=src, field=f"events[{i}].at_task", value=ev.at_task)
    if sc.phases:
        if sc.tasks is None:
            raise ScenarioError("'phases' need a 'tasks' stream", file=src, field="phases")
        total = sum(p.tasks for p in sc.phases)
        if total != sc.tasks.count:
            raise ScenarioError(f"phase lengths must add up to tasks.count ({sc.tasks.count})", file=src,
                                field="phases", value=total)
        names = [p.name for p in sc.phases]
        if len(set(names)) != len(names):
            raise ScenarioError("phase names must be unique", file=src, field="phases", value=names)


# --------------------------------------------------------------------------
# the files a run reads (provenance.json hashes them; resume compares them)


def input_files(sc: Scenario) -> dict[str, tuple[Path, bool]]:
    """``{role: (path, append_only)}`` of every file the scenario reads besides
    itself: ``topology``, ``tasks`` (the task file), ``dataset`` (the dataset
    profile), ``profile`` (the backend profile; ``inner`` is wrapped by a
    replay backend) and ``cassette`` (append-only: later recordings append).
    Only files that exist; call after the checks."""
    from ..backends import find_profile
    from ..backends.registry import backend_kind
    from ..workload.tasks import _profile_path

    base = sc.base_dir
    out: dict[str, tuple[Path, bool]] = {}

    def rel(p: str) -> Path:
        q = Path(p)
        return q if q.is_absolute() or base is None else base / q

    topo = sc.network.topology
    if topo.kind == "file" and isinstance((topo.model_extra or {}).get("path"), str):
        out["topology"] = (rel(topo.model_extra["path"]), False)
    if sc.tasks is not None and sc.tasks.file:
        out["tasks"] = (rel(sc.tasks.file), False)
    name = sc.agents.profile or (sc.tasks.dataset if sc.tasks is not None else None)
    if name:
        p = _profile_path(name)
        if p is not None:
            out["dataset"] = (p, False)

    def backend(spec: Any, role: str) -> None:
        if not isinstance(spec, dict):
            return
        kind = backend_kind(spec.get("kind"))
        if kind is not None and (kind.files is not None or kind.wraps is not None):
            # a wrapper (replay): its own files (the cassette), then the wrapped backend's profile
            for name, (p, may_lack) in (kind.files(spec) if kind.files is not None else {}).items():
                out[name] = (rel(p), may_lack)
            if kind.wraps is not None:
                backend(spec.get(kind.wraps), "inner")
        elif isinstance(spec.get("profile"), str):
            try:
                out[role] = (find_profile(spec["profile"], base), False)
            except InputError:
                pass

    if sc.backend is not None:
        backend(sc.backend.model_dump(), "profile")
    return {k: (p, a) for k, (p, a) in out.items() if p.is_file() or a}
