"""Figures and the HTML report of a sweep folder (``meshsim sweep``), drawn
from its tidy results (the runs' summaries) only (docs/sweeps.md#figures-and-the-report).

- :func:`tradeoff`: two metrics to minimise against each other (default:
  mean detection delay against false-isolation rate), one marker per point
  with 95 % interval bars, coloured by a third (the missed-detection rate),
  every point labelled with its parameters, the Pareto front marked and each
  front point marked distinguishable or not from its front neighbour (paired
  difference on shared seeds, :mod:`meshsim.sweep.stats`).
- :func:`heatmap`: a metric on two swept parameters.
- :func:`sensitivity`: a metric against one parameter (one panel per
  parameter without ``x``), one line per value of another (``by``).
- :func:`parallel`: parallel coordinates, every swept parameter and the
  chosen metrics, one line per point coloured by a metric.
- :func:`write_sweep_report`: ``SWEEP_DIR/report.html`` with all of them and
  the per-point table with intervals and paired differences.

Every figure takes ``where`` (fix swept parameters: ``{"window": 16}`` or
``["window=16"]``) and the multi-panel ones ``facet`` (one panel per value of a
parameter). A parameter neither drawn, fixed nor faceted is averaged, and the
figure says so: per seed, the points that differ only in such parameters are
averaged (the seeds are shared, so the average keeps its seed pairing), and the
interval is over those per-seed averages; heat-map cells then also show the
range of the averaged points' means (what the average hides).

Modules (each imports only those above it): :mod:`.data` (the folder's results, cells, the Pareto
front), :mod:`.stamps` (which results a figure was drawn from), :mod:`.tradeoff`, :mod:`.views` (heat
map, sensitivity, parallel coordinates), :mod:`.report` (report.html) and :mod:`.render` (``meshsim
plot`` of a sweep folder, redrawing stale figures and reports).
"""
from __future__ import annotations

from .data import (DELAY, FALSE_ISO, MISSED, SWEEP_KINDS, Cell, SweepData, cells, open_sweep, pareto_front,
                   point_means, search_info, seed_counts)
from .render import redraw_stale, render_sweep
from .report import build_sweep_report, write_sweep_report
from .stamps import FIGURES_STAMP, results_stamp, stale_figures, stamp_figure
from .tradeoff import tradeoff, tradeoff_points
from .views import heatmap, parallel, sensitivity

__all__ = ["SweepData", "open_sweep", "tradeoff", "heatmap", "sensitivity", "parallel", "pareto_front",
           "point_means", "cells", "Cell", "tradeoff_points", "render_sweep", "write_sweep_report",
           "build_sweep_report", "SWEEP_KINDS", "DELAY", "FALSE_ISO", "MISSED", "search_info", "seed_counts",
           "FIGURES_STAMP", "results_stamp", "stamp_figure", "stale_figures", "redraw_stale"]
