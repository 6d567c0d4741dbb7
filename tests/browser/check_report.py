#!/usr/bin/env python3
"""Open report.html files in headless Chromium and check what a reader sees (issue 32 item 6).

The report builders mark every figure they meant to include as a slot: an element with a
``data-figure`` attribute (``drawn``: a <figure> holding its <img>; ``not drawn``: the note saying
why), so a figure replaced by a note, or dropped, is seen. For each page: at least one slot, every
slot holding an image that loaded (complete, naturalWidth > 0), every other <img> loaded too, with
--min-figures at least that many loaded figures, no console error, no uncaught exception and no
failed resource load, and (with --max-height) the page no taller than that many CSS pixels at a
1280 px wide window. A PNG screenshot of each page goes to --shots.

    python tests/browser/check_report.py runs/x/report.html sweeps/y/report.html \\
        --min-figures 4 --max-height 6000 --shots .ci-artifacts

Exit 0 when every page passes, 1 when one fails (one line per problem), 2 when Chromium is
missing or does not answer. Chromium is driven over the DevTools protocol on a pipe
(--remote-debugging-pipe: fd 3 in, fd 4 out, messages ended by NUL): the standard library only,
no port, no download. Flags as this machine needs them (a fresh profile, no background
networking: the closed network refuses Chromium's own connections).
"""
from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

WIDTH, VIEW_HEIGHT = 1280, 900
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
         f"--window-size={WIDTH},{VIEW_HEIGHT}", "--remote-debugging-pipe"]
#: longest screenshot kept (CSS px): a runaway page still gives a readable, bounded PNG
SHOT_MAX = 16000

# what the page reports about itself once loaded
PROBE = """JSON.stringify({
  height: Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0),
  images: Array.from(document.images).map((im, i) => ({
    index: i, src: (im.getAttribute('src') || '').slice(0, 60), alt: im.alt || '',
    complete: im.complete, width: im.naturalWidth, height: im.naturalHeight})),
  slots: Array.from(document.querySelectorAll('[data-figure]')).map((el, i) => ({
    index: i, state: el.getAttribute('data-figure'),
    title: ((el.querySelector('h3') || {}).textContent || '').slice(0, 80),
    text: ((el.querySelector('.note') || el).textContent || '').replace(/\\s+/g, ' ').trim().slice(0, 160),
    images: Array.from(el.querySelectorAll('img')).map(im => Array.from(document.images).indexOf(im))})),
  first_figure: document.images.length
    ? Math.round(document.images[0].getBoundingClientRect().top + window.scrollY) : null,
  title: document.title})"""


class ChromiumError(RuntimeError):
    pass


def find_chromium() -> Optional[str]:
    for name in (os.environ.get("CHROMIUM") or "", "chromium", "chromium-browser", "google-chrome"):
        if name and (path := shutil.which(name)):
            return path
    return None


class Browser:
    """One headless Chromium, one page, the DevTools protocol over a pipe."""

    def __init__(self, exe: str, timeout: float = 60.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="meshsim-chromium-")
        to_child_r, self._w = os.pipe()
        self._r, from_child_w = os.pipe()
        # the child's fd 3 and 4 are these pipes; duplicated to fds >= 10 first, so dup2 in the child
        # never overwrites one with the other
        cr = fcntl.fcntl(to_child_r, fcntl.F_DUPFD_CLOEXEC, 10)
        cw = fcntl.fcntl(from_child_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_child_r)
        os.close(from_child_w)

        def child_fds() -> None:  # runs in the child between fork and exec
            os.dup2(cr, 3)
            os.dup2(cw, 4)

        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     close_fds=False, preexec_fn=child_fds)
        os.close(cr)
        os.close(cw)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []
        self.session: Optional[str] = None

    # -- protocol
    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChromiumError("Chromium did not answer in time")
            ready, _, _ = select.select([self._r], [], [], min(left, 1.0))
            if not ready:
                if self.proc.poll() is not None:
                    raise ChromiumError(f"Chromium exited (status {self.proc.returncode}): {self.stderr_tail()}")
                continue
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise ChromiumError(f"Chromium closed the pipe: {self.stderr_tail()}")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method: str, params: Optional[dict[str, Any]] = None, session: bool = True) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise ChromiumError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, method: str, since: int) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            for ev in self.events[since:]:
                if ev.get("method") == method:
                    return ev
            since = len(self.events)
            ev = self._read_message(deadline)
            if "method" in ev:
                self.events.append(ev)

    def stderr_tail(self) -> str:
        self.log.seek(0)
        return " | ".join(self.log.read().decode(errors="replace").strip().splitlines()[-3:])

    # -- page
    def open_page(self) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": WIDTH, "height": VIEW_HEIGHT, "deviceScaleFactor": 1, "mobile": False})

    def load(self, url: str) -> int:
        """Navigate and wait for the load event; returns the index of the first event of this page."""
        start = len(self.events)
        self.send("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired", start)
        return start

    def evaluate(self, expression: str) -> Any:
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                              "awaitPromise": True})
        if "exceptionDetails" in res:
            raise ChromiumError(f"evaluate: {res['exceptionDetails'].get('text')}")
        return res["result"].get("value")

    def screenshot(self, path: Path, height: int) -> None:
        h = max(1, min(height, SHOT_MAX))
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                    "clip": {"x": 0, "y": 0, "width": WIDTH, "height": h,
                                                             "scale": 1}})["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.send("Browser.close", session=False)
                except (ChromiumError, OSError):
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            for fd in (self._r, self._w):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)


def console_errors(events: list[dict[str, Any]]) -> list[str]:
    """Console errors, uncaught exceptions and failed loads among a page's protocol events."""
    out = []
    for ev in events:
        m, p = ev.get("method"), ev.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            e = p["entry"]
            out.append(f"{e.get('source')}: {e.get('text')} {e.get('url', '')}".strip())
    return out


def figure_problems(info: dict[str, Any], min_figures: Optional[int]) -> list[str]:
    """What is wrong with a page's figures (its probed ``slots`` and ``images``); sets
    ``info["figures"]``, the number of slots whose image loaded."""
    images = info["images"]
    loaded = [im["complete"] and im["width"] > 0 for im in images]
    problems, in_slots, good = [], set(), 0
    if not info["slots"]:
        problems.append("no figure slot (an element with data-figure) on the page")
    for slot in info["slots"]:
        n, title = slot["index"] + 1, slot["title"] or "untitled"
        in_slots.update(slot["images"])
        if not slot["images"]:
            problems.append(f"figure {n} ({title!r}) holds no image: {slot['text']!r}")
            continue
        for i in slot["images"]:
            if not loaded[i]:
                im = images[i]
                problems.append(f"figure {n} ({title!r}) did not load (src {im['src']!r}, alt {im['alt']!r})")
        good += all(loaded[i] for i in slot["images"])
    for i, im in enumerate(images):
        if i not in in_slots and not loaded[i]:
            problems.append(f"image {i + 1} (outside the figures) did not load (src {im['src']!r}, alt {im['alt']!r})")
    info["figures"] = good
    if min_figures is not None and good < min_figures:
        problems.append(f"{good} figures loaded, fewer than the {min_figures} expected (--min-figures)")
    return problems


def check_page(browser: Browser, page: Path, max_height: Optional[int], shots: Optional[Path],
               min_figures: Optional[int] = None) -> tuple[list[str], dict[str, Any]]:
    """(problems, facts) of one report page."""
    start = browser.load(page.resolve().as_uri())
    # decoding of data: images finishes after the load event at the latest; give late console output a moment
    info = json.loads(browser.evaluate(PROBE))
    time.sleep(0.2)
    browser.evaluate("0")  # drains events that arrived meanwhile
    problems = figure_problems(info, min_figures)
    problems += console_errors(browser.events[start:])
    if max_height is not None and info["height"] > max_height:
        problems.append(f"page is {info['height']} px tall, over the bound of {max_height} px")
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
        shot = shots / f"{page.resolve().parent.name or page.stem}.png"
        browser.screenshot(shot, info["height"])
        info["screenshot"] = str(shot)
    info["bytes"] = page.stat().st_size
    return problems, info


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="+", type=Path, help="report.html files")
    ap.add_argument("--min-figures", type=int, default=None, metavar="N",
                    help="fail a page with fewer than N figures that loaded (what its report holds today)")
    ap.add_argument("--max-height", type=int, default=None, metavar="PX",
                    help="fail a page taller than this (CSS px at a 1280 px wide window)")
    ap.add_argument("--shots", type=Path, default=None, metavar="DIR", help="write a PNG screenshot of each page here")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each answer of Chromium")
    args = ap.parse_args(argv)
    for p in args.pages:
        if not p.is_file():
            print(f"error: {p}: no such file", file=sys.stderr)
            return 2
    exe = find_chromium()
    if exe is None:
        print("error: Chromium not found (apt-get install -y chromium, or set CHROMIUM)", file=sys.stderr)
        return 2
    failed = 0
    browser = Browser(exe, timeout=args.timeout)
    try:
        browser.open_page()
        for page in args.pages:
            problems, info = check_page(browser, page, args.max_height, args.shots, args.min_figures)
            ok = "FAIL" if problems else "ok"
            first = f" (the first at {info['first_figure']} px)" if info.get("first_figure") is not None else ""
            print(f"{ok}: {page}: {info['figures']} figures{first}, {info['height']} px tall, {info['bytes']:,} bytes"
                  + (f", screenshot {info['screenshot']}" if "screenshot" in info else ""))
            for pr in problems:
                print(f"  {page}: {pr}")
            failed += bool(problems)
    except ChromiumError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        browser.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
