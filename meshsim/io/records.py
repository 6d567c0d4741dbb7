"""Run-folder files: atomic writes and per-record JSONL tables, plain or gzip-compressed.

A per-record table (``tasks``, ``reviews``, ``states``, ``rounds``,
``queries``, ``events``) is one JSON object per line. It is written as
``NAME.jsonl.gz`` by default (``output.format: jsonl.gz``) or as plain
``NAME.jsonl``; every reader here takes the logical name (``tasks.jsonl``) and
finds whichever form the folder holds. The gzip stream carries no file name
and a zero timestamp, so the same run writes the same bytes.

At the bottom of the package (no meshsim imports but the errors), so the
runner, the figures and the fit check all read and write the same way.
"""
from __future__ import annotations

import gzip
import json
import os
import tempfile
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

from ..core.errors import RunFolderError
from ..core.redact import scrub

__all__ = ["FORMATS", "write_atomic", "write_records", "TableWriter", "find_records", "has_records", "iter_records",
           "read_records", "json_default"]

#: record file formats a scenario may ask for (``output.format``)
FORMATS = ("jsonl.gz", "jsonl")
_GZIP_LEVEL = 6  # fixed: the bytes depend on it
_CHUNK = 2000  # lines per write: few syscalls, never the whole table as one string

_UMASK = os.umask(0)
os.umask(_UMASK)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder + rename.

    Text passes through :func:`meshsim.core.redact.scrub`: no API key reaches a run folder."""
    with _atomic(Path(path)) as fh:
        fh.write(scrub(data).encode("utf-8") if isinstance(data, str) else data)


class _atomic:
    """A binary file that appears at ``path`` only when closed without error.

    An ``OSError`` (a full or read-only disk) becomes a :class:`RunFolderError`
    naming ``path`` and the reason; the temp file is removed either way (a
    killed process leaves it: the next run removes it, see meshsim.io.runfolder)."""

    def __init__(self, path: Path):
        self.path = path
        self.tmp: Optional[str] = None

    def __enter__(self):
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, self.tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        except OSError as exc:
            raise _cannot_write(self.path, exc) from None
        self.fh = os.fdopen(fd, "wb")
        return self.fh

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.fh.close()
            assert self.tmp is not None  # set by __enter__
            if exc_type is None:
                os.chmod(self.tmp, 0o644 & ~_UMASK)
                os.replace(self.tmp, self.path)
                return
        except OSError as err:
            exc_type, exc = type(err), err
        if self.tmp and os.path.exists(self.tmp):
            try:
                os.unlink(self.tmp)
            except OSError:
                pass
        if isinstance(exc, OSError):
            raise _cannot_write(self.path, exc) from None


def _cannot_write(path: Path, exc: OSError) -> RunFolderError:
    reason = exc.strerror or str(exc) or type(exc).__name__
    return RunFolderError(f"cannot write: {reason}", file=str(path))


def json_default(o: Any) -> Any:
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def write_records(folder: Path, name: str, rows: Iterable[dict[str, Any]], fmt: str = "jsonl.gz") -> Path:
    """Write ``rows`` as ``folder/NAME`` (``fmt`` ``jsonl``) or ``folder/NAME.gz``
    (``jsonl.gz``), streaming: the table is never held as one string. Removes
    the other form if an earlier run left it, so a folder holds one of them."""
    out = _Table(Path(folder), name, fmt)
    try:
        for row in rows:
            out.add(row)
    except BaseException:
        out.abort()
        raise
    return out.commit()


class _Table:
    """One record table being written: rows are encoded as they come, written
    ``_CHUNK`` lines at a time into a temp file, which becomes ``NAME[.gz]`` at
    :meth:`commit` (:meth:`abort` removes it). The bytes depend only on the
    rows and their order, not on when they came: a table streamed during a run
    is the same file as one written from a list at its end."""

    def __init__(self, folder: Path, name: str, fmt: str):
        if fmt not in FORMATS:
            raise ValueError(f"unknown record format {fmt!r}")
        self.folder, self.name, self.fmt = folder, name, fmt
        self.path = folder / (name + ".gz" if fmt == "jsonl.gz" else name)
        self._file = _atomic(self.path)
        self._raw = self._file.__enter__()
        self._out = gzip.GzipFile(filename="", mode="wb", fileobj=self._raw, compresslevel=_GZIP_LEVEL, mtime=0) \
            if fmt == "jsonl.gz" else self._raw
        self._dumps = json.JSONEncoder(separators=(",", ":"), default=json_default).encode
        self._buf: list[str] = []
        self.rows = 0

    def add(self, row: dict[str, Any]) -> None:
        buf = self._buf
        buf.append(self._dumps(row))
        self.rows += 1
        if len(buf) >= _CHUNK:
            self._flush()

    def _flush(self) -> None:
        try:
            self._out.write(scrub("\n".join(self._buf) + "\n").encode("utf-8"))
        except OSError as exc:
            self.abort()
            raise _cannot_write(self.path, exc) from None
        self._buf.clear()

    def commit(self) -> Path:
        """Write what is left and put the table in place (temp file + rename)."""
        try:
            if self._buf:
                self._flush()
            if self._out is not self._raw:
                self._out.close()
        except OSError as exc:
            self.abort()
            raise _cannot_write(self.path, exc) from None
        except BaseException:
            self.abort()
            raise
        self._file.__exit__(None, None, None)
        other = self.folder / (self.name if self.fmt == "jsonl.gz" else self.name + ".gz")
        if other.exists():
            other.unlink()
        return self.path

    def abort(self) -> None:
        """Drop the table: its temp file is removed, nothing appears under its name."""
        if self._file.tmp is None or not os.path.exists(self._file.tmp):
            return
        try:
            if self._out is not self._raw:
                self._out.close()  # (a gzip stream must not write into the closed file later)
        except (OSError, ValueError):
            pass
        self._file.__exit__(RuntimeError, RuntimeError("aborted"), None)


class TableWriter:
    """The record tables of one run, streamed into its folder while it runs
    (issue 22: a 483,840-task run's rows never sit in memory).

    ``add(name, row)`` encodes the row at once and lets it go. Nothing appears
    under a table's name until :meth:`commit`, which puts every table in place
    at the end of a completed run; :meth:`abort` (a failed or interrupted run)
    removes every temp file, so no half-written table is left (docs/outputs.md).
    """

    def __init__(self, folder: Path, fmt: str = "jsonl.gz"):
        if fmt not in FORMATS:
            raise ValueError(f"unknown record format {fmt!r}")
        self.folder = Path(folder)
        self.fmt = fmt
        self._tables: dict[str, _Table] = {}

    def _table(self, name: str) -> _Table:
        t = self._tables.get(name)
        if t is None:
            t = self._tables[name] = _Table(self.folder, name, self.fmt)
        return t

    def add(self, name: str, row: dict[str, Any]) -> None:
        self._table(name).add(row)

    def extend(self, name: str, rows: Iterable[dict[str, Any]]) -> None:
        """Add ``rows`` to ``name`` (which is written, empty, with none)."""
        t = self._table(name)
        for row in rows:
            t.add(row)

    def names(self) -> list[str]:
        return list(self._tables)

    def commit(self) -> list[Path]:
        try:
            return [t.commit() for t in list(self._tables.values())]
        except BaseException:
            self.abort()
            raise
        finally:
            self._tables.clear()

    def abort(self) -> None:
        for t in self._tables.values():
            t.abort()
        self._tables.clear()


def find_records(folder: Path, name: str) -> Optional[Path]:
    """The file that holds table ``name`` (``tasks.jsonl``) in ``folder``, compressed or not."""
    folder = Path(folder)
    for cand in (folder / (name + ".gz"), folder / name):
        if cand.is_file():
            return cand
    return None


def has_records(folder: Path, name: str) -> bool:
    return find_records(folder, name) is not None


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a ``.jsonl`` or ``.jsonl.gz`` file, one at a time (a 576-agent run's
    reviews never sit in memory as text)."""
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    lineno = 0
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except ValueError:
                    raise RunFolderError(f"line {lineno}: not valid JSON (truncated file?)", file=str(path)) from None
    except (EOFError, OSError, zlib.error) as exc:
        if isinstance(exc, FileNotFoundError):
            raise RunFolderError("file not found", file=str(path)) from None
        raise RunFolderError(f"after line {lineno}: cannot read ({exc or type(exc).__name__}; truncated file?)",
                             file=str(path)) from None


def read_records(folder: Path, name: str) -> list[dict[str, Any]]:
    """Every row of table ``name`` in ``folder`` (compressed or not); [] when absent."""
    path = find_records(folder, name)
    return list(iter_records(path)) if path is not None else []
