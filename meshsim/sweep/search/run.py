"""Running a search into its folder, and what ``--dry-run`` says of it (see :mod:`meshsim.sweep.search`)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional

from ...core.errors import InputError
from ...io.records import write_atomic
from ..optuna_seam import Trials
from .front import finite, front_keys, refine
from .runner import Points, Runner, evaluate
from .spec import JOURNAL, RECOMMENDED, TRIALS, SearchOutcome, SearchPlan, num_text, require_optuna
from .study import check_journal, check_study_compatible, open_study, read_trials, seeded_sampler, trial_params
from .tables import write_front, write_trials


def run_search(sp: SearchPlan, out: str | Path, executor: str = "local", workers: Optional[int] = None,
               scheduler: Optional[str] = None, quiet: bool = False, live: Optional[bool] = None,
               echo: Callable[[str], None] = lambda s: None, every: float = 10.0,
               announce: Optional[Callable[[], None]] = None) -> SearchOutcome:
    """Run (or resume) the study into ``out``, refine the front and write
    trials.csv, front.csv, recommended.json and the sweep tables."""
    from ..executors import make_executor
    from ..folder import open_folder

    require_optuna()
    out = Path(out)
    folder = open_folder(sp.plan, out, sp.manifest(), lambda: make_executor(executor, workers, scheduler),
                         compatible=check_study_compatible, combine=_combine,
                         precheck=lambda: check_journal(out / JOURNAL))
    aborted = True
    try:
        tr = open_study(sp, out)
        if announce is not None:
            announce()
        echo(f"search: {folder.executor.describe()}")
        runner = Runner(sp, out, folder.executor, folder.manifest, {"live": live, "quiet": quiet, "every": every})
        search = _Search(sp, tr, runner, echo)
        resumed = search.resumed()
        search.place_unbatched()
        search.run_batches()
        front, rec, refinement_runs, written = _finish(search, folder.manifest)
        aborted = False
    finally:
        folder.close(aborted)
    return search.outcome(resumed, refinement_runs, front, rec, written)


def _combine(old: Optional[dict[str, Any]], new: dict[str, Any]) -> dict[str, Any]:
    """The folder's manifest: the union of the sweeps it holds, this search's settings."""
    from ..manifest import merge

    if old is None:
        return new
    manifest = merge(old, new)
    manifest["search"] = new["search"]
    return manifest


def _invalid(t: Any) -> bool:
    """A trial told FAIL for a setting the scenario rejects (its reason starts with ``invalid``)."""
    return str(t.user_attrs.get("reason", "")).startswith("invalid")


class _Search:
    """The steps of :func:`run_search` on one open study: batches asked, run and told in trial-number order,
    invalid draws told at once and replaced (docs/sweeps.md, "Search")."""

    def __init__(self, sp: SearchPlan, tr: Trials, runner: Runner, echo: Callable[[str], None]):
        from optuna.trial import TrialState

        self.sp, self.tr, self.study, self.runner, self.echo = sp, tr, tr.study, runner, echo
        self.State = TrialState
        self.points = Points(sp)
        self.dists = {r.path: r.distribution() for r in sp.spec.ranges}
        self.invalid_streak = 0

    def trials(self) -> list[Any]:
        return self.study.get_trials(deepcopy=False)

    def resumed(self) -> int:
        """Trials an earlier invocation finished (invalid draws left out)."""
        return sum(1 for t in self.trials() if t.state.is_finished() and not _invalid(t))

    def validity(self, t: Any) -> Any:
        """``(Point or None, values, reason)`` of a trial's parameters (:meth:`Points.make`)."""
        return self.points.make(trial_params(self.sp, self.tr, t))

    def is_invalid(self, t: Any) -> bool:
        return t.state == self.State.FAIL and _invalid(t) or \
            (t.state == self.State.RUNNING and self.validity(t)[0] is None)

    def tell_invalid(self, t: Any) -> None:
        _p, vals, reason = self.validity(t)
        self.tr.set_user_attr(t, "values", vals)
        self.tr.set_user_attr(t, "reason", f"invalid: {reason}")
        self.runner.extend([], [{"values": vals, "reason": reason}])
        self.study.tell(t.number, state=self.State.FAIL)

    def place_unbatched(self) -> None:
        """A trial asked but killed before its batch was noted belongs to the last batch."""
        trials = self.trials()
        last = max([t.user_attrs.get("batch", 0) for t in trials] or [0])
        for t in trials:
            if "batch" not in t.user_attrs:
                self.tr.set_user_attr(t, "batch", last)

    def run_batches(self) -> None:
        """Batch after batch until the budget's valid trials are told: each filled, run and told."""
        k = 0
        while True:
            trials = self.trials()
            members = [t for t in trials if t.user_attrs.get("batch") == k]
            valid_before = sum(1 for t in trials if t.user_attrs.get("batch", 0) < k and not self.is_invalid(t))
            if not members and valid_before >= self.sp.spec.trials:
                break
            self.fill(k, members, valid_before)
            k += 1
            batch = sorted((t for t in self.trials()
                            if t.user_attrs.get("batch") == k - 1 and t.state == self.State.RUNNING),
                           key=lambda t: t.number)
            if batch:
                self.run_batch(k - 1, batch)

    def fill(self, k: int, members: list[Any], valid_before: int) -> None:
        """Batch ``k`` gets its valid trials: an invalid point (alpha >= beta) is told FAIL at once and
        replaced, so every generation has its full population and the budget counts runs, not draws."""
        B, T = self.sp.spec.population, self.sp.spec.trials
        for t in members:  # an invalid point killed before it was told
            if t.state == self.State.RUNNING and self.is_invalid(t):
                self.tell_invalid(t)
        valid = [t for t in members if not self.is_invalid(t)]
        while len(valid) < min(B, T - valid_before):
            self.study.sampler = seeded_sampler(self.sp, len(self.trials()))
            t = self.study.ask(fixed_distributions=self.dists)
            self.tr.set_user_attr(t, "batch", k)
            ft = self.trials()[t.number]
            if self.validity(ft)[0] is None:
                self.tell_invalid(ft)
                self.invalid_streak += 1
                if self.invalid_streak >= 50 * B:
                    raise InputError(f"{self.invalid_streak} draws in a row gave invalid settings (the last: "
                                     f"{self.validity(ft)[2]}); narrow the ranges", field="--range")
                continue
            self.invalid_streak = 0
            valid.append(ft)

    def run_batch(self, k: int, batch: list[Any]) -> None:
        """Run every seed of batch ``k``'s points, then tell each trial its means (or FAIL) in number order."""
        sp, tr, runner, seeds = self.sp, self.tr, self.runner, self.sp.seeds
        made = {t.number: (t, self.validity(t)) for t in batch}
        pairs = [(pt, s) for _t, (pt, _v, _r) in made.values() for s in seeds]
        runner.extend(pairs)
        runner.run(pairs, f"batch {k}")
        ok = bad = 0
        for num in sorted(made):
            t, (point, vals, _reason) = made[num]
            tr.set_user_attr(t, "values", vals)
            tr.set_user_attr(t, "point", point.key)
            objs, viol, means, why = evaluate(sp, runner, point, seeds)
            tr.set_user_attr(t, "means", {m: finite(v) for m, v in means.items()})
            if objs is None:
                tr.set_user_attr(t, "reason", why)
                self.study.tell(num, state=self.State.FAIL)
                bad += 1
                continue
            tr.set_user_attr(t, "constraints", viol)
            self.study.tell(num, objs)
            ok += 1
        write_trials(sp, runner.out, self.study)
        all_t = self.trials()
        done = [t for t in all_t if t.state == self.State.COMPLETE]
        n_inv = sum(1 for t in all_t if t.user_attrs.get("batch") == k and self.is_invalid(t))
        self.echo(f"search: batch {k} (trials {min(made)}-{max(made)}) told: {ok} complete, {bad} failed"
                  + (f", {n_inv} invalid draws replaced" if n_inv else "")
                  + f"; {len(done)}/{sp.spec.trials} trials complete, front "
                  f"{len(front_keys(sp, runner, done, seeds))} points")

    def complete(self) -> list[Any]:
        return [t for t in self.trials() if t.state == self.State.COMPLETE]

    def outcome(self, resumed: int, refinement_runs: int, front: list[dict[str, Any]], rec: Optional[dict[str, Any]],
                written: list[Path]) -> SearchOutcome:
        trials = self.trials()
        invalid = sum(1 for t in trials if _invalid(t))
        runner = self.runner
        return SearchOutcome(runner.out, len(trials), sum(1 for t in trials if t.state == self.State.COMPLETE),
                             invalid, sum(1 for t in trials if t.state == self.State.FAIL) - invalid,
                             runner.executed, resumed, runner.failed, refinement_runs, front, rec, written,
                             runner.failures)


def _finish(search: _Search, manifest: dict[str, Any]) -> tuple[list[dict[str, Any]], Optional[dict[str, Any]],
                                                                 int, list[Path]]:
    """Refine the front (more seeds where the recommendation is decided), then write trials.csv, front.csv,
    recommended.json and the sweep tables: (front rows, recommendation, refinement runs, files written)."""
    from ..results import write_results

    sp, runner, out = search.sp, search.runner, search.runner.out
    complete = search.complete()
    for t in complete:
        point, _v, _r = search.points.make(dict(t.params))
        runner.points[point.key] = point
    before = runner.executed
    front, rec = refine(sp, runner, complete, search.echo)
    refinement_runs = runner.executed - before
    write_trials(sp, out, search.study)
    written = [out / TRIALS, write_front(sp, runner, out, front, rec)]
    write_atomic(out / RECOMMENDED, json.dumps(rec, indent=1, default=str) + "\n")
    written.append(out / RECOMMENDED)
    written += write_results(out, manifest)
    return front, rec, refinement_runs, written


# ------------------------------------------------------------------------------------ dry run


def describe_search(sp: SearchPlan, out: Path) -> list[str]:
    """What ``--dry-run`` prints (and refuses, as the run would): never writes."""
    from ..core import short_names
    from ..folder import check_folder

    s = sp.spec
    names = short_names([r.path for r in s.ranges])
    n = len(sp.seeds)
    lines = [f"{sp.plan.name}: search (Optuna NSGA-II, seed {s.seed}): {s.trials} trials in batches of {s.batch} "
             f"x {n} seed{'s' if n != 1 else ''} ({_seeds_text(sp.seeds)}) = up to {s.trials * n} runs; "
             f"the recommendation and its contenders refined up to {sp.max_seeds} seeds, at most "
             f"{sp.refine_runs} more runs -> {out}/",
             "  ranges: " + ", ".join(f"{names[r.path]} {num_text(r.low)}..{num_text(r.high)} ({r.kind})"
                                      for r in s.ranges),
             "  " + ", ".join(f"{o.direction} {o.metric}" for o in s.objectives)
             + ("; subject to " + ", ".join(c.text() for c in s.constraints) if s.constraints else "")]
    old = check_folder(sp.plan, out)  # refused as the run would refuse it
    if old is not None:
        check_study_compatible(old, sp.manifest(), out)
        trials = read_trials(out) or []
        inv = sum(1 for t in trials if str(t.user_attrs.get("reason", "")).startswith("invalid"))
        running = sum(1 for t in trials if not t.state.is_finished())
        done = len(trials) - running - inv
        lines.append(f"  folder: {done} trials finished, {running} to resume, "
                     f"{max(0, s.trials - done - running)} to ask")
    else:
        lines.append("  folder: new")
    return lines


def _seeds_text(seeds: list[int]) -> str:
    if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return "seed" + ("s " if len(seeds) != 1 else " ") + ",".join(map(str, seeds))
