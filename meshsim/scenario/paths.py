"""Dotted paths into raw scenario data (``a.b.0.c``; ``backend.overrides.<dotted
profile path>``): get, set, and ``--set PATH=VALUE`` overrides."""
from __future__ import annotations

import copy
from typing import Any

from ..core.errors import ScenarioError
from ..core.files import parse_yaml

__all__ = ["set_path", "get_path", "apply_overrides", "split_path"]


def _parse_value(text: str, field: str) -> Any:
    """An override's value, parsed as YAML with the file's checks (an alias
    bomb on the command line is refused too); text that is not YAML stays text."""
    if not text.strip():
        # `--set protocol.params=` would silently reset every parameter to its default
        raise ScenarioError("empty value (write PATH='' for an empty string, PATH={} for an empty mapping)",
                            file="--set", field=field)
    return parse_yaml(text, "--set", field, syntax_error_as_text=True)


def split_path(path: str, item: Any, source: str) -> list[str]:
    parts = [p for p in str(path).strip().split(".") if p]
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
    parts = split_path(path, item, source)
    cur: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(cur, list):
            if not part.isdigit() or int(part) >= len(cur):
                raise ScenarioError("list index out of range", file=source,
                                    field=".".join(parts[: i + 1]), value=part)
            if last:
                cur[int(part)] = value
            else:
                cur = cur[int(part)]
        elif isinstance(cur, dict):
            if last:
                cur[part] = value
            else:
                nxt = cur.get(part)
                if nxt is None:
                    nxt = cur[part] = {}
                elif not isinstance(nxt, (dict, list)):
                    raise ScenarioError("cannot set a field inside a scalar", file=source,
                                        field=".".join(parts[: i + 1]), value=nxt)
                cur = nxt
        else:
            raise ScenarioError("cannot set a field inside a scalar", file=source,
                                field=".".join(parts[:i]), value=cur)


_NOT_FOUND = object()


def get_path(data: Any, path: str, default: Any = _NOT_FOUND) -> Any:
    """The value at ``path`` in (raw or resolved) scenario data; ``default`` (or
    KeyError) when there is none. Same path syntax as :func:`set_path`."""
    cur = data
    for part in split_path(path, path, "<path>"):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            if default is _NOT_FOUND:
                raise KeyError(path)
            return default
    return cur


def apply_overrides(data: dict, overrides: list[str], source: str = "--set") -> dict:
    """Apply ``path=value`` overrides (``a.b.0.c=1``) to raw scenario data."""
    data = copy.deepcopy(data)
    for item in overrides:
        if "=" not in item:
            raise ScenarioError("expected PATH=VALUE", file="--set", value=item)
        path, raw = item.split("=", 1)
        set_path(data, path, _parse_value(raw, path.strip()), source, item)
    return data
