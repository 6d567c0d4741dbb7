"""Figures, tables and the HTML report of a run folder, drawn from its records only.

Every function here reads what a run wrote (``summary.json``,
``aggregate.json``, ``scenario.resolved.yaml`` and the per-record tables) and
never the simulator. matplotlib is imported inside the drawing functions, so
``import meshsim.plots`` stays cheap and works without it.

Conventions: a single-panel function takes ``ax=None`` and returns the axes it
drew on; a multi-panel one takes ``fig=None`` and returns the figure. The
``run`` argument is a path, a :class:`RunSet` or a :class:`RunFolder`.

Layout (each module imports only those above it in this list):

- :mod:`.folder`: reading a run folder (:class:`RunFolder`, :class:`RunSet`, :func:`open_run`).
- :mod:`.stats`: what the figures and tables show (degradation intervals, state
  series, self-healing marks, per-phase and per-agent :class:`Stat`).
- :mod:`.canvas`: matplotlib plumbing (colours, sizes, saving as PNG/PDF/SVG).
- :mod:`.healing`: :func:`timeline` / :func:`agent_timeline` (MeshHeal Fig. C1),
  :func:`state_heatmap`, :func:`detector_view` / :func:`detector_figure`.
- :mod:`.phases`: :func:`phase_bars` (Tab. 2-3).
- :mod:`.sac`: :func:`sac_figure`, :func:`sac_rounds`, :func:`bfti_bars` (SAC Tab. 1-2).
- :mod:`.graph`: :func:`topology`, the initial graph by final state or role.
- :mod:`.sweeps` (a package): a sweep folder's figures (trade-off with the Pareto front,
  heat map, sensitivity) and its report, from its tidy results (imported on
  demand: it loads :mod:`meshsim.sweep`).
- :mod:`.kinds`: one figure per CLI ``--kind`` (:func:`figure`, :func:`render`).
- :mod:`.report`: tables (text, CSV) and the self-contained ``report.html``.
- :mod:`.page`: the reports' HTML from ``templates/`` (:class:`string.Template`, every value escaped).
"""
from .canvas import DPI, FIGURE_FORMATS, WIDTH, check_figure_path, require_matplotlib, save_figure
from .folder import RunFolder, RunSet, open_run
from .graph import topology
from .healing import (agent_timeline, detector_figure, detector_view, heatmap_height, state_heatmap, timeline,
                      timeline_height)
from .kinds import KINDS, default_kind, figure, parse_agents, render
from .phases import phase_bars
from .sac import SAC_FIELDS, SacRun, bfti_bars, sac_figure, sac_rounds, sac_runs
from .stats import (Stat, choose_agents, default_agents, degraded_intervals, healing_marks, healing_stats, phase_stats,
                    state_series)

__all__ = [
    "RunFolder", "RunSet", "open_run", "KINDS", "DPI", "WIDTH", "FIGURE_FORMATS", "check_figure_path",
    "require_matplotlib",
    "timeline", "agent_timeline", "state_heatmap", "phase_bars", "detector_view", "detector_figure",
    "sac_figure", "sac_rounds", "bfti_bars", "sac_runs", "SacRun", "SAC_FIELDS", "topology", "save_figure",
    "render", "figure", "default_kind", "parse_agents", "default_agents", "choose_agents",
    "phase_stats", "healing_stats", "degraded_intervals", "state_series", "healing_marks", "Stat",
    "timeline_height", "heatmap_height",
]
