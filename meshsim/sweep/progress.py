"""One progress display over all runs of a sweep: done/total, failures,
runs/s and ETA. A live bar on a terminal; plain lines every few seconds
otherwise (CI logs, nohup, batch jobs), and always a last line."""
from __future__ import annotations

import sys
import time
from typing import Any, Optional, TextIO

__all__ = ["SweepProgress", "fmt_eta"]


def fmt_eta(seconds: Optional[float]) -> str:
    if seconds is None:
        return "?"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


class SweepProgress:
    """``total`` runs of which ``done`` were already finished (resumed)."""

    def __init__(self, total: int, done: int = 0, stream: Optional[TextIO] = None, live: Optional[bool] = None,
                 every: float = 10.0, quiet: bool = False):
        self.total, self.done0 = total, done
        self.ok = self.failed = 0
        self.stream = stream or sys.stderr
        self.live = (self.stream.isatty() if live is None else live) and not quiet
        self.quiet = quiet
        self.every = every
        self.t0 = time.monotonic()
        self._last = 0.0
        self._bar: Any = None  # a rich Progress while live

    # -- numbers ---------------------------------------------------------------------------------
    @property
    def finished(self) -> int:
        return self.done0 + self.ok + self.failed

    def rate(self) -> Optional[float]:
        n = self.ok + self.failed
        dt = time.monotonic() - self.t0
        return n / dt if n and dt > 0 else None

    def eta(self) -> Optional[float]:
        r = self.rate()
        return (self.total - self.finished) / r if r else None

    def line(self) -> str:
        r = self.rate()
        parts = [f"{self.finished}/{self.total} runs"]
        if self.done0:
            parts.append(f"{self.done0} resumed")
        if self.failed:
            parts.append(f"{self.failed} failed")
        parts.append(f"{r:.2f} runs/s" if r else "- runs/s")
        parts.append(f"ETA {fmt_eta(self.eta())}" if self.finished < self.total else
                     f"{fmt_eta(time.monotonic() - self.t0)} elapsed")
        return "sweep: " + ", ".join(parts)

    # -- display ---------------------------------------------------------------------------------
    def start(self) -> "SweepProgress":
        if self.quiet:
            return self
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._bar = Progress(TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[info]}"),
                                 console=Console(file=self.stream), transient=False)
            self._bar.start()
            self._task = self._bar.add_task("sweep", total=self.total, completed=self.finished, info="")
        else:
            self._emit()
        return self

    def advance(self, ok: bool) -> None:
        if ok:
            self.ok += 1
        else:
            self.failed += 1
        if self.quiet:
            return
        if self._bar is not None:
            r = self.rate()
            info = (f"{self.failed} failed · " if self.failed else "") + \
                (f"{r:.2f} runs/s · ETA {fmt_eta(self.eta())}" if r else "")
            self._bar.update(self._task, completed=self.finished, info=info)
        elif time.monotonic() - self._last >= self.every:
            self._emit()

    def _emit(self) -> None:
        self._last = time.monotonic()
        print(self.line(), file=self.stream, flush=True)

    def close(self) -> None:
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        self._emit()
