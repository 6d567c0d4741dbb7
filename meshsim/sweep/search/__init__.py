"""``meshsim sweep SCENARIO --search optuna``: a noise-aware search for
settings (detector thresholds) on the sweep's executors (docs/sweeps.md,
"Search").

- **Ranges** ``PATH=LOW:HIGH[:float|int|log]`` span the search space;
  **objectives** (``--minimize`` / ``--maximize`` a ``results.csv`` metric)
  and **constraints** (``METRIC<=V``, ``>=``, ``==``) say what is good.
- The sampler is Optuna's NSGA-II (multi-objective, constraint-aware:
  feasible trials dominate infeasible ones). Trials are asked in **batches of
  a fixed size** (NSGA-II's population, one generation per batch), every
  trial of a batch is evaluated, and the batch is told in trial-number order:
  what is asked never depends on which run finished first, so the study is
  the same on one worker, a process pool or Dask. The sampler is reseeded
  for every trial from (search seed, trial number), so a resumed study asks
  what the uninterrupted one would have. A draw the scenario rejects
  (α ≥ β) is told FAIL at once and replaced in its batch.
- **Common random numbers:** every trial runs the same seeds, so two trials
  differ by their parameters, not by their luck; a trial's objective values
  are means over those seeds.
- Every trial's seeds are ordinary sweep runs (``runs/<point>/seed-<s>/``,
  listed in ``manifest.json``): ``results.csv``, ``summary.csv``, ``meshsim
  plot`` and ``meshsim report`` work on a search folder as on a grid.
- The study lives in the folder (``study.journal``, Optuna's JournalStorage
  on an append-only file: each write is one fsync'd line, a line cut by
  ``kill -9`` is dropped on reopen). A rerun tells no finished trial again
  and reuses every finished run.
- **Constraints:** ``==`` holds on every seed of a point (``detection.missed==0``:
  no run missed an agent), ``<=`` / ``>=`` on the mean over its seeds; both over
  every seed the point ran, refinement seeds included.
- **Seed refinement:** the current recommendation and its contenders (points
  no objective yet tells apart from it, :func:`meshsim.sweep.stats.distinguishable`,
  paired on shared seeds) get more seeds (the next seeds after the trials' ones,
  the same for every point), the recommendation recomputed after each round,
  until it is told apart from every contender, each has ``max_seeds``, or the
  refinement's run budget is spent. The ends of the front, already told apart,
  get none.
- **Recommendation** (:func:`_choose`): among the feasible front points, drop
  those another front point dominates by the interval rule; keep those not
  distinguishably worse than the best on the second objective (then the third,
  …); take the best 95 % bound on the first objective and every kept point it
  does not beat distinguishably; of those, the best means on the later
  objectives. Intervals of rates and counts are clipped to their range.

The package: :mod:`.spec` (ranges, objectives, constraints, the plan), :mod:`.study` (the Optuna study in the
folder), :mod:`.runner` (trial parameters to sweep points and their runs), :mod:`.front` (the front, the seed
refinement, the recommendation), :mod:`.tables` (trials.csv, front.csv), :mod:`.run` (:func:`run_search`,
:func:`describe_search`).
"""
from __future__ import annotations

from .front import interval_dominates
from .run import describe_search, run_search
from .spec import (FRONT, JOURNAL, RECOMMENDED, TRIALS, Constraint, Objective, Range, SearchOutcome, SearchPlan,
                   SearchSpec, check_metrics, default_batch, parse_constraint, parse_range, plan_search)
from .study import check_journal, check_study_compatible

__all__ = ["Range", "Objective", "Constraint", "SearchSpec", "SearchPlan", "SearchOutcome", "parse_range",
           "parse_constraint", "plan_search", "run_search", "describe_search", "JOURNAL", "FRONT", "TRIALS",
           "RECOMMENDED", "default_batch", "check_metrics", "check_journal", "check_study_compatible",
           "interval_dominates"]
