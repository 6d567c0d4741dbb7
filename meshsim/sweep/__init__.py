"""``meshsim sweep``: a scenario over a grid of parameters and seeds, on a
local process pool or Dask distributed, resumable, with tidy results
(docs/sweeps.md).

::

    from meshsim.sweep import plan_sweep, run_sweep, load_results
    plan = plan_sweep("scenarios/sweeps/alpha-beta-staggered-6.yaml", smoke=True)
    outcome = run_sweep(plan, "runs/ab", workers=2)
    df = load_results("runs/ab")          # one row per run (pandas)

Layout: :mod:`.spec` (axes, seeds, output level), :mod:`.worker` (one run,
in any process), :mod:`.executors` (inline, process pool, Dask),
:mod:`.progress`, :mod:`.manifest` (what the folder is a sweep of, resume
rules), :mod:`.results` (results.csv, summary.csv, Parquet, pandas),
:mod:`.stats` (intervals, paired differences), :mod:`.slices` (``--where``,
the reference point),
:mod:`.core` (plan and run).
"""
from .core import (Plan, Point, SweepOutcome, SweepStatus, plan_sweep, point_label, resume_args, run_sweep,
                   short_names, sweep_status)
from .executors import EXECUTORS, default_workers, make_executor
from .manifest import MANIFEST, read_manifest
from .results import RESULTS, SUMMARY, flatten, load_results, read_table, write_results
from .spec import OUTPUT_LEVELS, Axis, SweepSpec, parse_values, spec_from_section

__all__ = ["plan_sweep", "run_sweep", "load_results", "read_table", "write_results", "Plan", "Point",
           "SweepOutcome", "SweepSpec", "Axis", "OUTPUT_LEVELS", "EXECUTORS", "MANIFEST", "RESULTS", "SUMMARY",
           "make_executor", "default_workers", "read_manifest", "flatten", "parse_values", "spec_from_section",
           "short_names", "point_label", "is_sweep_folder", "resume_args", "sweep_status", "SweepStatus"]


def is_sweep_folder(path) -> bool:
    from pathlib import Path

    return (Path(path) / MANIFEST).is_file()
