"""Dotted paths into raw scenario data (``a.b.0.c``; ``backend.overrides.<dotted
profile path>``): get, set, and ``--set PATH=VALUE`` overrides, on :mod:`meshsim.core.dotted`
with the scenario's one-line errors."""
from __future__ import annotations

import copy
from typing import Any

from ..core import dotted
from ..core.errors import ScenarioError
from ..core.files import parse_yaml

__all__ = ["set_path", "get_path", "apply_overrides", "split_path"]

_RAISE: Any = object()


def _parse_value(text: str, field: str) -> Any:
    """An override's value, parsed as YAML with the file's checks (an alias
    bomb on the command line is refused too); text that is not YAML stays text."""
    if not text.strip():
        # `--set protocol.params=` would silently reset every parameter to its default
        raise ScenarioError("empty value (write PATH='' for an empty string, PATH={} for an empty mapping)",
                            file="--set", field=field)
    return parse_yaml(text, "--set", field, syntax_error_as_text=True)


def split_path(path: str, item: Any, source: str) -> list[str]:
    """The parts of a scenario path; the rest of a ``backend.overrides.`` path is one key."""
    parts = dotted.split(str(path))
    if not parts:
        raise ScenarioError("empty path", file=source, value=item)
    # backend.overrides holds dotted profile paths as keys: the rest of the path is one key
    if len(parts) > 2 and parts[0] == "backend" and parts[1] == "overrides":
        parts = parts[:2] + [".".join(parts[2:])]
    return parts


def set_path(data: dict, path: str, value: Any, source: str = "--set", item: Any = None) -> None:
    """Set ``path`` (``a.b.0.c``; ``backend.overrides.<dotted profile path>``) in
    raw scenario ``data`` to ``value``, in place: missing mappings are created,
    list items are addressed by index."""
    item = f"{path}=..." if item is None else item
    try:
        dotted.set_path(data, split_path(path, item, source), value)
    except dotted.PathError as e:
        raise ScenarioError(e.reason, file=source, field=e.at, value=e.value) from None


def get_path(data: Any, path: str, default: Any = _RAISE) -> Any:
    """The value at ``path`` in (raw or resolved) scenario data; ``default`` (or
    KeyError) when there is none. Same path syntax as :func:`set_path`."""
    got = dotted.get_path(data, split_path(path, path, "<path>"), dotted.MISSING)
    if got is dotted.MISSING:
        if default is _RAISE:
            raise KeyError(path)
        return default
    return got


def apply_overrides(data: dict, overrides: list[str], source: str = "--set") -> dict:
    """Apply ``path=value`` overrides (``a.b.0.c=1``) to raw scenario data."""
    data = copy.deepcopy(data)
    for item in overrides:
        if "=" not in item:
            raise ScenarioError("expected PATH=VALUE", file="--set", value=item)
        path, raw = item.split("=", 1)
        set_path(data, path, _parse_value(raw, path.strip()), source, item)
    return data
