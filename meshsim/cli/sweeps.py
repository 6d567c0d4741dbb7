"""``meshsim sweep``: a grid of parameters and seeds, or ``--search optuna`` over ranges (docs/sweeps.md)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..core.errors import InputError
from ..scenario.fields import CONFIRM_RUNS, SEEDS_HELP, check_plan_runs
from .app import _safe, _seed_text, main, SEED


class _ArgvCommand(click.Command):
    """Keeps the raw arguments (ctx.meta["argv"]): the order of --minimize / --maximize matters."""

    def parse_args(self, ctx, args):  # type: ignore[override]
        ctx.meta["argv"] = list(args)
        return super().parse_args(ctx, args)


def _objectives(argv: list[str]) -> list[tuple[str, str]]:
    """(direction, metric) of every --minimize / --maximize, in command-line order."""
    out = []
    for i, a in enumerate(argv):
        for d in ("minimize", "maximize"):
            if a == f"--{d}" and i + 1 < len(argv):
                out.append((d, argv[i + 1]))
            elif a.startswith(f"--{d}="):
                out.append((d, a.split("=", 1)[1]))
    return out


@main.command(cls=_ArgvCommand)
@click.argument("scenario", type=click.Path(dir_okay=False), required=False)
@click.option("--grid", "grid", multiple=True, metavar="PATH=VALUES",
              help="A swept parameter: a range START:STOP:STEP (both ends included), a list 1.5,2,3 or [..], "
                   "or one value (repeatable: the cartesian product). Replaces the file's sweep section axes.")
@click.option("--zip", "zips", multiple=True, metavar="PATH=VALUES",
              help="Parameters that vary together (every --zip axis takes its i-th value at once).")
@click.option("--seeds", default=None, metavar="SEEDS",
              help=f"Seeds of every point: {SEEDS_HELP} (default: the spec's, else the scenario's topped up to "
                   "5 consecutive seeds).")
@click.option("--yes", is_flag=True, help=f"Run a plan of more than {CONFIRM_RUNS:,} runs (refused without it).")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", help="Override a scenario field for every point.")
@click.option("--out", "-o", type=click.Path(file_okay=False), default=None,
              help="Sweep folder (default: runs/sweep-<scenario name>, or runs/<name> for a name starting with "
                   "'sweep'); rerunning resumes it, and 'meshsim sweep --out DIR' alone reruns DIR's last "
                   "sweep command (its manifest holds the scenario, grid, seeds, sets and output level).")
@click.option("--workers", type=click.IntRange(1, 4096), default=None,
              help="Processes (local) or LocalCluster workers (dask); default: the CPUs available.")
@click.option("--executor", type=click.Choice(["local", "dask"]), default="local", show_default=True,
              help="local: a process pool on this machine; dask: Dask distributed.")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="With --executor dask: 'local' (default) starts a LocalCluster; an address such as "
                   "tcp://host:8786 connects to a running scheduler.")
@click.option("--output", "output", type=click.Choice(["summary", "records", "full"]), default=None,
              help="What each run keeps: summary (default), records (every table but reviews), full.")
@click.option("--smoke", is_flag=True, help="Apply the scenario's and the sweep section's 'smoke' overrides.")
@click.option("--dry-run", is_flag=True, help="List the points, which runs are done and pending in the folder, "
              "the skipped points and a refused change of the study; write nothing (exit 2 when refused).")
@click.option("--quiet", "-q", is_flag=True, help="No progress display.")
@click.option("--reference", "reference", multiple=True, metavar="PATH=VALUE,...",
              help="summary.csv's paired differences: to the point at these values (other parameters: each "
                   "point's own); default: the scenario's own values that are grid values.")
@click.option("--search", type=click.Choice(["optuna"]), default=None,
              help="Search the --range space for the --minimize / --maximize objectives instead of a grid "
                   "(docs/sweeps.md#search).")
@click.option("--range", "ranges", multiple=True, metavar="PATH=LOW:HIGH[:int|:log]",
              help="With --search: a searched parameter, uniform float (default), int or log-uniform.")
@click.option("--minimize", "minimize", multiple=True, metavar="METRIC",
              help="With --search: an objective (a results.csv column); the first objective given leads.")
@click.option("--maximize", "maximize", multiple=True, metavar="METRIC", help="With --search: an objective.")
@click.option("--constraint", "constraints", multiple=True, metavar="METRIC<=V",
              help="With --search: METRIC<=V, METRIC>=V or METRIC==V on the mean over seeds.")
@click.option("--trials", type=click.IntRange(1, 100_000), default=60, show_default=True,
              help="With --search: trials (points asked of the sampler).")
@click.option("--batch", type=click.IntRange(2, 1000), default=None,
              help="With --search: trials asked at once (NSGA-II's population); default trials/6 within 4..16.")
@click.option("--max-seeds", type=click.IntRange(1, 10_000), default=None,
              help="With --search: seeds a point near the front may get (default 2x the trials' seeds, "
                   "at least 4 more).")
@click.option("--refine-runs", type=click.IntRange(0, 10_000_000), default=None,
              help="With --search: runs the front's refinement may add (default a quarter of the trials' runs).")
@click.option("--search-seed", type=SEED, default=0, show_default=True,
              help="With --search: the sampler's seed (same seed, same study).")
def sweep(scenario: str | None, grid: tuple[str, ...], zips: tuple[str, ...], seeds: str | None, sets: tuple[str, ...],
          out: str | None, workers: int | None, executor: str, scheduler: str | None, output: str | None,
          smoke: bool, dry_run: bool, quiet: bool, reference: tuple[str, ...] = (), search: str | None = None,
          ranges: tuple[str, ...] = (), minimize: tuple[str, ...] = (), maximize: tuple[str, ...] = (),
          constraints: tuple[str, ...] = (), trials: int = 60, batch: int | None = None, max_seeds: int | None = None,
          refine_runs: int | None = None, search_seed: int = 0, yes: bool = False) -> int:
    """Run SCENARIO over a grid of parameters and seeds (docs/sweeps.md).

    Writes OUT/manifest.json, one folder per run under OUT/runs/, and the tidy
    OUT/results.csv and OUT/summary.csv. Without SCENARIO, --out DIR reruns
    DIR's last sweep command (options given here replace its own; the folder
    rules say which changes extend it and which are refused). With --search
    optuna: a noise-aware search over the --range parameters instead of a grid,
    which also writes OUT/trials.csv, OUT/front.csv and OUT/recommended.json.
    Exit 0 when every run finished; 100 + the number of failed runs (at most
    199) otherwise; 2 for bad input; 143 on SIGTERM, 130 on Ctrl-C."""
    from ..sweep import plan_sweep, point_label, resume_args, run_sweep, short_names

    if scheduler and executor != "dask":
        raise InputError("--scheduler goes with --executor dask", field="--scheduler", value=scheduler)
    if search:
        if scenario is None:
            raise InputError("a search resumes with its own command: give SCENARIO and the same --range / "
                             "objectives with --out DIR", field="SCENARIO")
        return _search(scenario, grid, zips, seeds, sets, out, workers, executor, scheduler, output, smoke, dry_run,
                       quiet, ranges, minimize, maximize, constraints, trials, batch, max_seeds, refine_runs,
                       search_seed, yes)
    for opt, given in (("--range", ranges), ("--minimize", minimize), ("--maximize", maximize),
                       ("--constraint", constraints), ("--batch", batch), ("--max-seeds", max_seeds),
                       ("--refine-runs", refine_runs)):
        if given:
            raise InputError(f"{opt} goes with --search optuna", field=opt, value=given)
    if scenario is None:
        if out is None:
            raise InputError("give a SCENARIO, or --out DIR of a sweep folder to resume it", field="SCENARIO")
        args = resume_args(out, sets, bool(grid or zips))
        if grid or zips:  # new axes replace the stored ones, as they replace a file's
            args["grid"], args["zips"] = list(grid), list(zips)
        scenario = args["path"]
        seeds = seeds if seeds is not None else args["seeds"]
        sets = tuple(args["sets"]) + tuple(sets)
        output = output or args["output"]
        smoke = smoke or args["smoke"]
        grid, zips = tuple(args["grid"]), tuple(args["zips"])
    else:
        from ..core.bundled import scenario_arg

        scenario = scenario_arg(scenario)  # a file, or a shipped example's name
    plan = plan_sweep(scenario, grid, zips, seeds, sets, output, smoke)
    check_plan_runs(len(plan.runs), yes, "--seeds", seeds)
    if reference:  # checked before any run: a typo must not cost the sweep
        from ..sweep.slices import parse_fixes

        parse_fixes(reference, plan.spec.paths, lambda p: [pt.values[p] for pt in plan.points], "--reference")
    names = short_names(plan.spec.paths)
    name = _safe(plan.name)
    out_dir = Path(out) if out else Path("runs") / (name if name.startswith("sweep") else f"sweep-{name}")

    for w in plan.warnings:
        click.echo(f"warning: {w}", err=True)

    def announce() -> None:
        n = len(plan.runs)
        click.echo(f"{plan.name}: {len(plan.points)} point{'s' if len(plan.points) != 1 else ''} x "
                   f"{len(plan.seeds)} seed{'s' if len(plan.seeds) != 1 else ''} "
                   f"({_seed_text(plan.seeds)}) = {n} run{'s' if n != 1 else ''} -> {out_dir}/")
        if plan.skipped:
            click.echo(f"skipped {len(plan.skipped)} invalid point{'s' if len(plan.skipped) != 1 else ''}:")
            for sk in plan.skipped:
                click.echo(f"  {point_label(sk['values'], names)}: {sk['reason']}")

    if dry_run:
        return _sweep_dry_run(plan, out_dir, names, announce)
    res = run_sweep(plan, out_dir, executor=executor, workers=workers, scheduler=scheduler, quiet=quiet,
                    echo=(lambda m: None) if quiet else (lambda m: click.echo(m, err=True)), announce=announce,
                    reference=list(reference) or None)
    click.echo(f"{res.total} runs: {res.total - res.failed} finished ({res.resumed} resumed), {res.failed} failed"
               + (f", {res.skipped} points skipped" if res.skipped else ""))
    for f in res.failures[:10]:
        vals = plan_point_values(plan, f["point"])
        click.echo(f"  failed: {point_label(vals, names)} seed {f['seed']}: {f['error']}")
    if len(res.failures) > 10:
        click.echo(f"  ... and {len(res.failures) - 10} more (results.csv, column error)")
    click.echo("wrote " + ", ".join(str(p) for p in res.written))
    from ..plots.sweeps import redraw_stale

    redraw_stale(out_dir, echo=click.echo)  # figures and report.html drawn before the sweep grew (docs/sweeps.md)
    return 100 + min(res.failed, 99) if res.failed else 0


def _sweep_dry_run(plan: Any, out_dir: Path, names: dict, announce: Any) -> int:
    """``meshsim sweep --dry-run``: every point with its done / pending seeds in
    the folder, the skipped points, and the refusal a real run would meet."""
    from ..sweep import point_label, sweep_status

    st = sweep_status(plan, out_dir)
    announce()
    n_done = sum(len(v) for v in st.done.values())
    n_failed = sum(len(v) for v in st.failed.values())
    n_pending = sum(len(v) for v in st.pending.values())
    if st.refused is None:
        click.echo(f"{n_done} done, {n_pending} pending" + (f" ({n_failed} failed before, rerun)" if n_failed else "")
                   + (f"; {st.others} more runs in the folder from earlier grids stay as they are"
                      if st.others else "") + (" (nothing would run)" if not n_pending else ""))
    width = max((len(point_label(p.values, names)) for p in plan.points), default=0)
    for p in plan.points:
        done, pending, failed = st.done.get(p.key, []), st.pending.get(p.key, []), st.failed.get(p.key, [])
        state = "done" if not pending else ("pending" if not done else "partly done")
        if st.refused is not None:
            state = "refused"
        detail = f"{len(done)}/{len(plan.seeds)} seeds done" if st.refused is None else ""
        if pending and done and st.refused is None:
            detail += f", pending {_seed_text(pending)}"
        if failed:
            detail += f", failed before: {_seed_text(failed)}"
        click.echo(f"  {p.key}  {point_label(p.values, names):<{width}}  {state:<11} {detail}".rstrip())
    if st.refused is not None:
        click.echo(f"error: {st.refused}", err=True)
        return 2
    return 0

 
def _search(scenario, grid, zips, seeds, sets, out, workers, executor, scheduler, output, smoke, dry_run, quiet,
            ranges, minimize, maximize, constraints, trials, batch, max_seeds, refine_runs, search_seed,
            yes=False) -> int:
    """``meshsim sweep --search optuna`` (docs/sweeps.md#search)."""
    from ..sweep.search import describe_search, plan_search, run_search

    if grid or zips:
        raise InputError("--search takes --range, not --grid / --zip", field="--grid", value=list(grid + zips))
    objectives = _objectives(click.get_current_context().meta.get("argv", [])) or \
        [("minimize", m) for m in minimize] + [("maximize", m) for m in maximize]
    sp = plan_search(scenario, list(ranges), objectives, list(constraints), seeds, sets, output, smoke, trials,
                     batch, search_seed, max_seeds, refine_runs=refine_runs)
    check_plan_runs(trials * len(sp.seeds) + sp.refine_runs, yes, "--seeds", seeds)
    name = _safe(sp.plan.name)
    out_dir = Path(out) if out else Path("runs") / f"search-{name}"
    lines = describe_search(sp, out_dir)
    if dry_run:
        for ln in lines:
            click.echo(ln)
        return 0
    say = (lambda m: None) if quiet else (lambda m: click.echo(m, err=True))
    res = run_search(sp, out_dir, executor=executor, workers=workers, scheduler=scheduler, quiet=quiet, echo=say,
                     announce=lambda: [click.echo(ln) for ln in lines])
    click.echo(f"{res.complete + res.failed_trials} trials: {res.complete} complete ({res.resumed_trials} resumed), "
               f"{res.failed_trials} failed" + (f", {res.invalid} invalid draws replaced" if res.invalid else "")
               + f"; {res.runs} runs ({res.refinement_runs} refining the front), {res.failed_runs} failed")
    click.echo(f"front: {len(res.front)} point{'s' if len(res.front) != 1 else ''} -> {out_dir / 'front.csv'}")
    rec = res.recommended
    if res.front:
        from ..sweep import short_names

        paths = [r.path for r in sp.spec.ranges]
        pn = short_names(paths)
        mn = short_names([o.metric for o in sp.spec.objectives])
        for r in res.front[:12]:
            ivs = "  ".join(f"{mn[m]} {iv.mean:.4g}" + (f" [{iv.lo:.4g}, {iv.hi:.4g}]" if iv.n > 1 else "")
                            for m, iv in r["intervals"].items())
            indistinct = r["distinct_prev"] is False or r["distinct_next"] is False
            sep = " (indistinct from a neighbour)" if indistinct else ""
            click.echo(f"  {r['rank']:>2} {' '.join(f'{pn[p]}={r[p]}' for p in paths)}  {ivs}  "
                       f"({r['seeds']} seeds){sep}" + ("  <- recommended" if rec and rec["point"] == r["point"]
                                                        else ""))
        if len(res.front) > 12:
            click.echo(f"  ... and {len(res.front) - 12} more (front.csv)")
    if rec is None:
        click.echo("recommended: none (no trial satisfies the constraints)")
    else:
        from ..sweep import short_names

        names = short_names(list(rec["values"]))
        click.echo(f"recommended (front point {rec['rank']}, trial {rec['trial']}, {rec['seeds']} seeds): "
                   + " ".join(f"{names[p]}={v}" for p, v in rec["values"].items()))
        for m, iv in rec["objectives"].items():
            ci = f" [{iv['lo']:.4g}, {iv['hi']:.4g}]" if iv["lo"] is not None else ""
            click.echo(f"  {m}: {iv['mean']:.4g}{ci}")
        click.echo(f"  {rec['set']}")
    click.echo("wrote " + ", ".join(str(p) for p in res.written))
    from ..plots.sweeps import redraw_stale

    redraw_stale(out_dir, echo=click.echo)  # figures drawn before the search went on
    return 100 + min(res.failed_runs, 99) if res.failed_runs else 0


def plan_point_values(plan: Any, key: str) -> dict:
    return next((p.values for p in plan.points if p.key == key), {})
