"""One figure per CLI ``--kind``, written to PNG, PDF or SVG."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from ..core.errors import InputError
from .canvas import save_figure, _new_figure
from .folder import open_run, RunFolder, RunSet, _as_folder
from .healing import detector_figure, state_heatmap, timeline, heatmap_height
from .phases import phase_bars
from .sac import sac_figure
from .graph import topology


KINDS = ("timeline", "heatmap", "phases", "detector", "sac", "topology", "gray")


def parse_agents(text: Optional[str]) -> Optional[list[str]]:
    if not text:
        return None
    out = [a.strip() for a in text.split(",") if a.strip()]
    return out or None


def default_kind(run: Any) -> str:
    rf = _as_folder(run)
    if rf.is_meshheal:
        return "timeline" if len(rf.agents()) <= 40 else "heatmap"
    if rf.is_sac:
        return "sac"
    return "topology"


def figure(kind: str, run_dirs: Sequence[Any], agents: Optional[Sequence[str]] = None,
           seed: Optional[int] = None):
    """Build the figure of ``kind`` (one of :data:`KINDS`) for the run folder(s)."""
    if kind not in KINDS:
        raise InputError(f"unknown plot kind (choose from {', '.join(KINDS)})", field="--kind", value=kind)
    if kind == "sac":
        return sac_figure(list(run_dirs))
    if kind == "gray":  # SAC / CP-WBFT with gray failures (docs/sac.md)
        from .sac import gray_figure

        return gray_figure(list(run_dirs))
    if len(run_dirs) != 1:
        raise InputError(f"--kind {kind} takes one run folder (several only for --kind sac)",
                         field="RUN_DIR", value=[str(r) for r in run_dirs])
    rs = open_run(run_dirs[0])
    if kind == "phases":
        return phase_bars(rs)
    rf = rs.run(seed)
    if kind == "timeline":
        return timeline(rf, agents=agents)
    if kind == "heatmap":
        fig = _new_figure(heatmap_height(len(agents or rf.agents())))
        state_heatmap(rf, agents=agents, ax=fig.add_subplot(1, 1, 1))
        return fig
    if kind == "detector":
        return detector_figure(rf, agents=agents)
    return topology(rf)


def render(run_dirs: Sequence[Any] | Any, kind: Optional[str] = None, agents: Optional[Sequence[str]] = None,
           seed: Optional[int] = None, out: Optional[Path | str] = None) -> Path:
    """Draw ``kind`` and write it as a PNG; returns the file written.

    Default file: ``RUN_DIR/<kind>.png`` (``<kind>-seed-<s>.png`` for a seed of a
    multi-seed folder).
    """
    if isinstance(run_dirs, (str, Path, RunSet, RunFolder)):
        run_dirs = [run_dirs]
    run_dirs = list(run_dirs)
    if not run_dirs:
        raise InputError("give at least one run folder", field="RUN_DIR")
    if kind == "gray":  # run or sweep folders (docs/sac.md)
        from .sac import gray_figure

        return save_figure(gray_figure(run_dirs), out if out is not None else Path(run_dirs[0]) / "gray.png")
    first = open_run(run_dirs[0])
    kind = kind or default_kind(first.run(seed))
    fig = figure(kind, [first] + run_dirs[1:], agents=agents, seed=seed)
    if out is None:
        suffix = f"-seed-{first.run(seed).seed}" if first.multi and kind not in ("phases", "sac", "gray") else ""
        out = first.path / f"{kind}{suffix}.png"
    return save_figure(fig, out)
