"""Dotted paths into nested data: the one way meshsim reads, writes, deletes and lists them.

A path such as ``protocol.params.alpha`` or ``agents.A3.closure`` names a value inside nested
mappings; a part made of digits addresses a list item by index (``score.qwen3-4b.agree.0``).
Scenario overrides (``--set``), sweep axes, profile overrides, calibration, summaries' metrics
and redaction all walk their data with these functions, so one path means the same thing
everywhere.

At the bottom of the package (no meshsim imports): a caller turns :class:`PathError` into its
own one-line input error, naming its file and field.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Union

__all__ = ["MISSING", "PathError", "split", "join", "get_path", "set_path", "delete_path", "nest", "leaves"]

Path = Union[str, Sequence[str]]


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


#: a default for :func:`get_path` that no data holds: ``get_path(d, p, MISSING) is MISSING``
MISSING: Any = _Missing()
_RAISE: Any = _Missing()


class PathError(LookupError):
    """A path that cannot be set: ``reason``, the path up to where it failed (``at``) and the
    value found there."""

    def __init__(self, reason: str, at: str, value: Any):
        self.reason, self.at, self.value = reason, at, value
        super().__init__(f"{at}: {reason} (got {value!r})" if at else f"{reason} (got {value!r})")


def split(path: Path) -> list[str]:
    """The parts of ``path`` (``a.b.0`` -> ``['a', 'b', '0']``); surrounding blanks and empty
    parts are dropped. A sequence of parts is taken as it is."""
    if isinstance(path, str) or not isinstance(path, Sequence):
        return [p for p in str(path).strip().split(".") if p]
    return [str(p) for p in path]


def join(prefix: str, key: Any) -> str:
    """``prefix.key`` (``key`` alone at the top)."""
    return f"{prefix}.{key}" if prefix else str(key)


def _index(cur: list[Any], part: str) -> int:
    return int(part) if part.isdigit() and int(part) < len(cur) else -1


def get_path(data: Any, path: Path, default: Any = _RAISE) -> Any:
    """The value at ``path`` in ``data``; ``default`` when there is none (a KeyError naming the
    path when no default is given)."""
    cur = data
    for part in split(path):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and _index(cur, part) >= 0:
            cur = cur[int(part)]
        else:
            if default is _RAISE:
                raise KeyError(path if isinstance(path, str) else ".".join(split(path)))
            return default
    return cur


def set_path(data: Any, path: Path, value: Any, *, create: bool = True) -> None:
    """Set ``path`` in ``data`` to ``value``, in place. With ``create``, missing (or null)
    mappings on the way are created; without it only an existing leaf can be replaced (a typo must
    not add an unused field). A list item is addressed by an index within the list."""
    parts = split(path)
    cur = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        at = ".".join(parts[: i + 1])
        if isinstance(cur, list):
            if _index(cur, part) < 0:
                raise PathError("list index out of range", at, part)
            if last:
                cur[int(part)] = value
            else:
                cur = cur[int(part)]
        elif isinstance(cur, dict):
            if not create and part not in cur:
                raise PathError("no such field", at, part)
            if last:
                cur[part] = value
                continue
            nxt = cur.get(part)
            if nxt is None:
                if not create:
                    raise PathError("no such field", at, part)
                nxt = cur[part] = {}
            elif not isinstance(nxt, (dict, list)):
                raise PathError("cannot set a field inside a scalar", at, nxt)
            cur = nxt
        else:
            raise PathError("cannot set a field inside a scalar", ".".join(parts[:i]), cur)


def delete_path(data: Any, path: Path, fill: Any = None) -> None:
    """Remove ``path`` from ``data`` in place, when it is there. A list item is replaced by
    ``fill`` instead (removing it would move the items after it)."""
    parts = split(path)
    if not parts:
        return
    holder = get_path(data, parts[:-1], MISSING) if len(parts) > 1 else data
    last = parts[-1]
    if isinstance(holder, dict):
        holder.pop(last, None)
    elif isinstance(holder, list) and _index(holder, last) >= 0:
        holder[int(last)] = fill


def nest(path: Path, value: Any) -> Any:
    """``value`` inside mappings along ``path`` (``a.b`` -> ``{'a': {'b': value}}``)."""
    for part in reversed(split(path)):
        value = {part: value}
    return value


def leaves(data: Any, *, lists: bool = False, skip: Iterable[str] = (), prefix: str = ""
           ) -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of every leaf of ``data``, in its order: mappings are walked (an empty
    one has no leaves); with ``lists``, list items too (by index); keys named in ``skip`` are
    passed over with all below them."""
    skip = frozenset(skip)
    if isinstance(data, dict):
        for k, v in data.items():
            if str(k) not in skip:
                yield from leaves(v, lists=lists, skip=skip, prefix=join(prefix, k))
    elif lists and isinstance(data, (list, tuple)):
        for i, v in enumerate(data):
            yield from leaves(v, lists=lists, skip=skip, prefix=join(prefix, i))
    else:
        yield prefix, data
