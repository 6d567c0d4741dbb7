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

from .errors import RunFolderError
from .redact import scrub

__all__ = ["FORMATS", "write_atomic", "write_records", "find_records", "has_records", "iter_records",
           "read_records", "json_default", "dig"]

#: record file formats a scenario may ask for (``output.format``)
FORMATS = ("jsonl.gz", "jsonl")
_GZIP_LEVEL = 6  # fixed: the bytes depend on it
_CHUNK = 2000  # lines per write: few syscalls, never the whole table as one string

_UMASK = os.umask(0)
os.umask(_UMASK)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder + rename.

    Text passes through :func:`meshsim.redact.scrub`: no API key reaches a run folder."""
    with _atomic(Path(path)) as fh:
        fh.write(scrub(data).encode("utf-8") if isinstance(data, str) else data)


class _atomic:
    """A binary file that appears at ``path`` only when closed without error.

    An ``OSError`` (a full or read-only disk) becomes a :class:`RunFolderError`
    naming ``path`` and the reason; the temp file is removed either way (a
    killed process leaves it: the next run removes it, see meshsim.runfolder)."""

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


def dig(data: Any, path: str) -> Any:
    """The value at dotted ``path`` of nested mappings (a summary's
    ``agents.A3.closure``); None when any step is missing."""
    for part in path.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def write_records(folder: Path, name: str, rows: Iterable[dict[str, Any]], fmt: str = "jsonl.gz") -> Path:
    """Write ``rows`` as ``folder/NAME`` (``fmt`` ``jsonl``) or ``folder/NAME.gz``
    (``jsonl.gz``), streaming: the table is never held as one string. Removes
    the other form if an earlier run left it, so a folder holds one of them."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown record format {fmt!r}")
    folder = Path(folder)
    path = folder / (name + ".gz" if fmt == "jsonl.gz" else name)
    dumps = json.JSONEncoder(separators=(",", ":"), default=json_default).encode
    with _atomic(path) as raw:
        out = gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=_GZIP_LEVEL, mtime=0) \
            if fmt == "jsonl.gz" else raw
        buf: list[str] = []
        for row in rows:
            buf.append(dumps(row))
            if len(buf) >= _CHUNK:
                out.write(scrub("\n".join(buf) + "\n").encode("utf-8"))
                buf.clear()
        if buf:
            out.write(scrub("\n".join(buf) + "\n").encode("utf-8"))
        if out is not raw:
            out.close()
    other = folder / (name if fmt == "jsonl.gz" else name + ".gz")
    if other.exists():
        other.unlink()
    return path


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
