"""Reading input files safely: the one way every input file enters meshsim.

Every file a run depends on (scenario, topology, task file, dataset and
backend profiles, cassette, prompt templates) is read here, so one set of
rules holds for all of them:

* only regular files, read with a size cap (``/dev/zero``, a FIFO or a
  directory is a one-line error at once, not a 5 GB read);
* YAML with unique keys (a duplicate key is an error naming file, line and
  key: a silent "last one wins" hides typos), bounded nesting depth and
  bounded alias expansion (an alias bomb or a recursive alias is an error
  before anything walks the data);
* numbers that are finite and fit in 64 bits, everywhere (``.nan``, ``.inf``
  and 2**200 are errors naming the field): nothing in a scenario or a profile
  gives infinity a meaning.

Every failure is an :class:`~meshsim.core.errors.InputError` naming the file; an
``OSError`` (permission denied, I/O error) keeps its reason. At the bottom of
the package: imports nothing of meshsim but the errors.
"""
from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import json
import math
import os
import stat
from pathlib import Path
from typing import Any, Iterator, Optional

import yaml

from .errors import InputError, RunFolderError

__all__ = ["MiB", "LIMITS", "MAX_DEPTH", "MAX_NODES", "INT64", "read_bytes", "read_text", "load_yaml",
           "parse_yaml", "check_numbers", "json_loads", "file_digest", "os_reason", "shipped", "is_input_file",
           "is_input_dir", "parse_value", "read_output_yaml", "OUTPUT_LIMIT"]

MiB = 1 << 20
#: size caps per kind of input file (bytes); docs/scenarios.md lists them
LIMITS = {
    "scenario": 16 * MiB,
    "profile": 16 * MiB,
    "topology": 256 * MiB,
    "tasks": 512 * MiB,
    "cassette": 2048 * MiB,
    "prompt": 4 * MiB,
}
#: most YAML values (nodes) a file of each kind may hold, counted while it is
#: read: a scenario with 20,000 events holds about 120,000; a 10 MB file of
#: 200,000 events took minutes and 1.4 GB to reach any check (issue 19)
YAML_VALUES = {"scenario": 250_000, "profile": 250_000}
#: deepest YAML nesting accepted (a scenario needs about 8)
MAX_DEPTH = 64
#: most YAML nodes a document may expand to, counting every alias use in full
MAX_NODES = 1_000_000
#: the 64-bit signed range every integer must fit (seeds, counts, C-level sizes)
INT64 = (-(2 ** 63), 2 ** 63 - 1)


def os_reason(exc: OSError) -> str:
    """An OSError's reason, never empty (``MemoryError`` and friends have none)."""
    return exc.strerror or str(exc) or type(exc).__name__


def _kind_name(kind: str) -> str:
    return {"tasks": "task file", "cassette": "cassette", "topology": "topology file",
            "profile": "profile", "scenario": "scenario file", "prompt": "prompt file"}.get(kind, f"{kind} file")


#: input files shipped with a sweep task (path as the scenario names it -> content), in force while a Dask
#: worker runs that task (:func:`shipped`): a worker on another machine cannot open the client's paths. A
#: context variable, so that runs in a worker's threads each see their own files.
_SHIPPED: contextvars.ContextVar[Optional[dict[str, bytes]]] = contextvars.ContextVar("meshsim_shipped",
                                                                                       default=None)


@contextlib.contextmanager
def shipped(files: Optional[dict[str, bytes]]) -> Iterator[None]:
    """While in force, :func:`read_bytes` of a path in ``files`` returns its
    content without touching the filesystem (the same cap applies), and
    :func:`is_input_file` says it exists. The paths keep their text, so every
    message and every output that names a file is what a local run gives."""
    token = _SHIPPED.set({str(Path(k)): v for k, v in files.items()} if files else None)
    try:
        yield
    finally:
        _SHIPPED.reset(token)


def _shipped(path: str | Path) -> Optional[bytes]:
    files = _SHIPPED.get()
    return None if files is None else files.get(str(Path(path)))


def is_input_file(path: str | Path) -> bool:
    """``Path(path).is_file()``, or a file shipped with the task (:func:`shipped`)."""
    return _shipped(path) is not None or Path(path).is_file()


def is_input_dir(path: str | Path) -> bool:
    """``Path(path).is_dir()``, or a folder of which a file was shipped (a BIG-bench task folder)."""
    files = _SHIPPED.get()
    if files and any(Path(k).parent == Path(path) for k in files):
        return True
    return Path(path).is_dir()


def read_bytes(path: str | Path, kind: str, limit: Optional[int] = None, field: Optional[str] = None) -> bytes:
    """The bytes of a regular file, at most ``limit`` (default: ``LIMITS[kind]``).

    A missing file, a directory, a device or FIFO, an unreadable file and a
    file over the cap are each one :class:`InputError` naming ``path``. The
    file is opened first and checked through its descriptor, so what is
    checked is what is read.
    """
    path = Path(path)
    cap = LIMITS.get(kind, 16 * MiB) if limit is None else limit
    what = _kind_name(kind)
    data = _shipped(path)
    if data is not None:  # read (and capped) by the sweep's client: checked again here, as the file would be
        if len(data) > cap:
            raise InputError(f"{what} is {len(data) / MiB:.1f} MiB, above the {cap // MiB} MiB limit for "
                             f"{what}s", file=str(path), field=field)
        return data
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        hint = ""
        if kind == "scenario":  # a mistyped example name: the close ones and the list (issue 32)
            from .bundled import not_found_hint

            hint = not_found_hint(str(path))
        raise InputError(f"{what} not found{hint}", file=str(path), field=field) from None
    except IsADirectoryError:
        raise InputError(f"is a directory, expected a {what}", file=str(path), field=field) from None
    except OSError as exc:
        raise InputError(f"cannot open the {what}: {os_reason(exc)}", file=str(path), field=field) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"is a directory, expected a {what}", file=str(path), field=field)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"not a regular file (a device, FIFO or socket); a {what} must be a file",
                             file=str(path), field=field)
        if st.st_size > cap:
            raise InputError(f"{what} is {st.st_size / MiB:.1f} MiB, above the {cap // MiB} MiB limit for "
                             f"{what}s", file=str(path), field=field)
        chunks = []
        left = cap + 1  # a file growing past the cap while read (or /proc files, size 0) is caught too
        while left > 0:
            chunk = os.read(fd, min(left, 4 * MiB))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise InputError(f"{what} is larger than the {cap // MiB} MiB limit for {what}s", file=str(path),
                             field=field)
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {os_reason(exc)}", file=str(path), field=field) from None
    finally:
        os.close(fd)


def read_text(path: str | Path, kind: str, limit: Optional[int] = None, field: Optional[str] = None) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a binary file is one error, not a traceback)."""
    data = read_bytes(path, kind, limit, field)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not a UTF-8 text file (byte {exc.start})", file=str(path), field=field) from None


def file_digest(path: str | Path, upto: Optional[int] = None) -> tuple[int, str]:
    """(size, sha256) of a file, or of its first ``upto`` bytes (a cassette that
    has only grown since keeps the digest of its old prefix)."""
    import hashlib

    h = hashlib.sha256()
    n = 0
    # opened without blocking and checked through its descriptor: a FIFO named
    # as an input must be refused, not waited on (issue 19)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError("not a regular file (a device, FIFO or socket); an input must be a file",
                             file=str(path))
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        while upto is None or n < upto:
            chunk = f.read(4 * MiB if upto is None else min(4 * MiB, upto - n))
            if not chunk:
                break
            h.update(chunk)
            n += len(chunk)
    return n, h.hexdigest()


# --------------------------------------------------------------------------
# YAML


class _Refused(yaml.YAMLError):  # type: ignore[misc]  # (PyYAML ships no types)
    """A document the loader will not build (too deep, too large, duplicate key)."""

    def __init__(self, message: str, mark: Any = None):
        super().__init__(message)
        self.message = message
        self.mark = mark


class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # (PyYAML ships no types)
    """``yaml.SafeLoader`` that refuses duplicate keys, deep nesting, recursive
    aliases and documents whose aliases expand past :data:`MAX_NODES`.

    PyYAML composes an alias as a second reference to the anchored node, so
    the document stays small while loading; the expansion happens later, in
    whatever walks the data (validation, dumping the resolved scenario). The
    composer therefore counts each node's expanded size and stops early.
    """

    #: most nodes composed at all (set per call by :func:`parse_yaml`): counted as
    #: they are read, so a huge document stops early instead of after minutes
    max_composed: int = MAX_NODES

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._composed = 0
        self._depth = 0
        self._open: set[str] = set()  # anchors whose node is being composed
        self._size: dict[int, int] = {}  # id(node) -> nodes it expands to

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        anchor = getattr(event, "anchor", None)
        if isinstance(event, yaml.AliasEvent):
            if anchor in self._open:
                raise _Refused(f"recursive alias *{anchor} (it refers to a node that contains it)",
                               event.start_mark)
            return super().compose_node(parent, index)
        self._composed += 1
        if self._composed > self.max_composed:
            raise _Refused(f"more than {self.max_composed:,} YAML values: far more than this kind of file needs "
                           "(hundreds of thousands of events?)", event.start_mark)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
        if anchor is not None:
            self._open.add(anchor)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor is not None:
                self._open.discard(anchor)
        size = 1
        if isinstance(node, yaml.SequenceNode):
            size += sum(self._size.get(id(c), 1) for c in node.value)
        elif isinstance(node, yaml.MappingNode):
            size += sum(self._size.get(id(k), 1) + self._size.get(id(v), 1) for k, v in node.value)
        if size > MAX_NODES:
            raise _Refused(f"aliases expand to more than {MAX_NODES:,} values (an alias bomb?)", event.start_mark)
        self._size[id(node)] = size
        return node

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *base` then own keys: the documented way to override
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:
                    continue  # an unhashable key: the base constructor reports it
                if first is not None:
                    raise _Refused(f"duplicate key {key!r} (first at line {first.line + 1}; a later one would "
                                   "silently win)", key_node.start_mark)
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)



def parse_yaml(text: str, source: str, field: Optional[str] = None, syntax_error_as_text: bool = False,
               max_values: int = MAX_NODES) -> Any:
    """YAML ``text`` (from ``source``) as plain data, with the checks of this module.

    ``syntax_error_as_text``: text that is not YAML at all comes back as the
    string itself (a ``--set`` value such as ``a: b: c``); refused documents
    (too deep, alias bombs, duplicate keys) are errors either way."""
    if not syntax_error_as_text and len(text) <= _CACHED_TEXT:
        # the same file is often read several times in one command (a fake profile: checked
        # at preflight, then built, per seed); parsing is the slow part, so it is done once
        return copy.deepcopy(_parse_once(text, source, field, max_values))
    return _parse(text, source, field, syntax_error_as_text, max_values)


_CACHED_TEXT = 256 * 1024  # larger texts (long event scripts) are parsed each time, not kept


@functools.lru_cache(maxsize=32)
def _parse_once(text: str, source: str, field: Optional[str], max_values: int) -> Any:
    return _parse(text, source, field, False, max_values)


def _parse(text: str, source: str, field: Optional[str], syntax_error_as_text: bool, max_values: int) -> Any:
    # A cheap bound before the (pure-Python, slow) parser runs: every mapping
    # entry holds a ':', so a text with more of them than values allowed is
    # refused at once rather than after seconds of parsing.
    if text.count(":") > max_values:
        raise InputError(f"more than {max_values:,} YAML values ({text.count(':'):,} key separators): far more "
                         "than this kind of file needs (hundreds of thousands of events?)", file=source, field=field)
    try:
        loader = type("_Bounded", (_Loader,), {"max_composed": max_values})
        data = yaml.load(text, Loader=loader)  # noqa: S506 - _Loader is a SafeLoader
    except _Refused as exc:
        where = f"line {exc.mark.line + 1}" if exc.mark is not None else None
        raise InputError(exc.message, file=source, field=_join(field, where)) from None
    except yaml.YAMLError as exc:
        if syntax_error_as_text:
            _check_text(text, source, field)
            return text
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"YAML syntax error: {problem}", file=source, field=_join(field, where)) from None
    except RecursionError:  # pragma: no cover - MAX_DEPTH stops it first
        raise InputError(f"nested deeper than {MAX_DEPTH} levels", file=source, field=field) from None
    check_numbers(data, source, field)
    return data


def _join(a: Optional[str], b: Optional[str]) -> Optional[str]:
    return ": ".join(p for p in (a, b) if p) or None


def load_yaml(path: str | Path, kind: str, field: Optional[str] = None) -> Any:
    """A YAML input file: :func:`read_text` (size cap, regular file) then :func:`parse_yaml`."""
    return parse_yaml(read_text(path, kind, field=field), str(path), field,
                      max_values=YAML_VALUES.get(kind, MAX_NODES))


def parse_value(text: str, source: str, field: Optional[str] = None, lenient: bool = False) -> Any:
    """A value given on the command line (``--set``, ``--grid``, ``--where``
    PATH=VALUE): YAML with this module's checks; text that is not YAML stays
    text and an empty text is ``""``.

    ``lenient``: a value the checks refuse (an alias bomb, a duplicate key,
    ``.nan``) comes back as its text instead of an error: for code that only
    shows or redacts a value, which is refused where it is applied."""
    if text == "":
        return ""
    try:
        return parse_yaml(text, source, field, syntax_error_as_text=True)
    except InputError:
        if lenient:
            return text
        raise


#: largest YAML file of a run folder read back (a resolved scenario with every alias expanded)
OUTPUT_LIMIT = 64 * MiB


def read_output_yaml(path: str | Path) -> Any:
    """A YAML file meshsim wrote into a run folder (``scenario.resolved.yaml``),
    read back: capped in size and in values like an input, and a missing,
    unreadable or damaged file is one :class:`RunFolderError` line naming it
    (a folder is not trusted to be what meshsim left)."""
    try:
        text = read_text(path, "output", limit=OUTPUT_LIMIT)
        return _parse(text, str(path), None, False, MAX_NODES)
    except RunFolderError:
        raise
    except InputError as exc:
        raise RunFolderError(exc.message, file=str(path), field=exc.field, value=exc.value) from None


def _check_text(text: str, source: Optional[str], path: Optional[str]) -> None:
    # a lone surrogate ("\ud800" in a YAML or JSON escape) decodes but can never be
    # written as UTF-8: every output would fail later (issue 19)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InputError(f"text holds a lone surrogate ({text[exc.start]!a} at character {exc.start}) that "
                             "cannot be written as UTF-8", file=source, field=path or None) from None


def check_numbers(data: Any, source: Optional[str], prefix: Optional[str] = None) -> None:
    """Every float finite and every integer within 64 bits, anywhere in ``data``;
    every text (values and keys) encodable as UTF-8 (no lone surrogates).

    Raises :class:`InputError` naming the dotted path (``network.links.latency``).
    Iterative, so no input can exhaust the stack.
    """
    stack: list[tuple[Any, str]] = [(data, prefix or "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            _check_text(value, source, path)
            continue
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                raise InputError("must be a finite number (nothing here gives infinity or NaN a meaning)",
                                 file=source, field=path or None, value=value)
        elif isinstance(value, int):
            if not INT64[0] <= value <= INT64[1]:
                raise InputError("integer out of range (must fit in 64 bits: -2**63 .. 2**63-1)", file=source,
                                 field=path or None, value=value)
        elif isinstance(value, dict):
            for k, v in value.items():
                if isinstance(k, str):
                    _check_text(k, source, path or None)
                stack.append((v, f"{path}.{k}" if path else str(k)))
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                stack.append((v, f"{path}[{i}]"))


# --------------------------------------------------------------------------
# JSON


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def json_loads(text: str | bytes) -> Any:
    """``json.loads`` that refuses NaN / Infinity and nesting that would exhaust
    the stack (both as ``ValueError``, which callers turn into a line number)."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None

