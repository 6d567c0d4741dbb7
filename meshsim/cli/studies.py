"""``meshsim uncertainty`` and ``meshsim verdict``: studies on the sweep engine (docs/uncertainty.md,
docs/verdict.md)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..core.errors import InputError
from ..scenario.fields import SEEDS_HELP
from .app import _executor_options, _safe, _seed_text, main, SEED


@main.command()
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--metric", "metrics", multiple=True, metavar="PATH",
              help="A number of summary.json as a dotted path (detection.false_isolations, "
                   "accuracy.by_phase.degraded, bfti; repeatable). Default: the protocol's headline metrics.")
@click.option("--budget", type=click.IntRange(1, 10_000_000), default=None,
              help="Simulation runs in all (samples x seeds): 1 base sample, Morris trajectories in about half, "
                   "2 ends per top factor, the rest Latin hypercube. Default 3000.")
@click.option("--seeds", default=None, metavar="SEEDS",
              help=f"Seeds of every sample (the same at each: common random numbers): {SEEDS_HELP} (default: "
                   "the scenario's).")
@click.option("--top", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Factors in the band: the top by mu* (each metric's normalised to its largest).")
@click.option("--paper", "papers", multiple=True, metavar="METRIC=VALUE",
              help="The paper's value of a metric: bands.csv classifies the prediction against it.")
# deliberate repetition: verdict writes out the same options with help texts of its own (issue 31)
@click.option("--design-seed", type=SEED, default=1, show_default=True,
              help="Seed of the Morris and Latin-hypercube designs (not of the runs).")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", help="Override a scenario field.")
@click.option("--smoke", is_flag=True, help="Apply the scenario's 'smoke' overrides (small runs).")
@click.option("--out", "-o", type=click.Path(file_okay=False), default=None,
              help="Folder (default: runs/uncertainty-<scenario name>); rerunning resumes it.")
@_executor_options
@click.option("--dry-run", is_flag=True, help="Check everything, list the design and stop (writes nothing).")
@click.option("--quiet", "-q", is_flag=True, help="No progress display.")
def uncertainty(scenario: str, metrics: tuple[str, ...], budget: int | None, seeds: str | None, top: int,
                papers: tuple[str, ...], design_seed: int, sets: tuple[str, ...], smoke: bool, out: str | None,
                workers: int | None, executor: str, scheduler: str | None, dry_run: bool, quiet: bool) -> int:
    """Morris screening over every assumption range of SCENARIO's backend profile, then 5-95 % prediction
    bands over the top factors (docs/uncertainty.md).

    Writes OUT/ranking.csv, bands.csv, samples.csv, tornado.png and report.html beside the sweep folder's
    runs; resumable. Exit 0; 100 + the number of failed runs when some failed; 2 for bad input."""
    from ..uncertainty import check_metrics, plan_uncertainty, run_uncertainty

    if scheduler and executor != "dask":
        raise InputError("--scheduler goes with --executor dask", field="--scheduler", value=scheduler)
    paper: dict[str, float] = {}
    for item in papers:
        m, sep, v = item.partition("=")
        try:
            paper[m.strip()] = float(v)
        except ValueError:
            sep = ""
        if not sep or not m.strip():
            raise InputError("expected METRIC=NUMBER", field="--paper", value=item)
    study = plan_uncertainty(scenario, metrics, budget, seeds, top, design_seed, sets, smoke, paper)
    check_metrics(study)
    from ..uncertainty.core import noise_warning

    a = study.alloc
    out_dir = Path(out) if out else Path("runs") / f"uncertainty-{_safe(study.name)}"

    def announce() -> None:  # (after the folder's checks: bad input still gets its one line only)
        if noise_warning(len(study.seeds)):
            click.echo(noise_warning(len(study.seeds)), err=True)
        click.echo(f"{study.name}: {study.k} assumption factors of {study.profile_path}; metrics "
                   f"{', '.join(study.metrics)}")
        click.echo(f"budget {a.budget} runs: {a.samples} samples x {len(study.seeds)} seeds "
                   f"({_seed_text(study.seeds)}) = {a.runs} runs: 1 base, {a.trajectories} Morris trajectories "
                   f"({a.morris} samples), {a.ends} ends and {a.lhs} Latin-hypercube samples over the top {a.top} "
                   f"-> {out_dir}/")

    if dry_run:
        announce()
        for f in study.factors:
            rng = f"x[{f.low:g}, {f.high:g}]" if f.scale is not None else f"[{f.low:g}, {f.high:g}]"
            click.echo(f"  {f.name}  {rng}  ({len(f.leaves)} number{'s' if len(f.leaves) != 1 else ''})")
        return 0
    res = run_uncertainty(study, out_dir, executor=executor, workers=workers, scheduler=scheduler, quiet=quiet,
                          echo=(lambda m: None) if quiet else (lambda m: click.echo(m, err=True)), announce=announce)
    click.echo(f"{res.total} runs: {res.total - res.failed} finished ({res.resumed} resumed), {res.failed} failed")
    for m in study.metrics:
        rk = [r for r in res.ranking if r["metric"] == m][:5]
        click.echo(f"{m}: " + "; ".join(f"{r['factor']} mu*={_g(r['mu_star'])} sigma={_g(r['sigma'])}"
                                        for r in rk))
    for b in res.bands:
        click.echo(f"{b['metric']}: base {_g(b['base_mean'])} (seed sd {_g(b['seed_sd'])}), band 5-95 % "
                   f"{_g(b['band_p5'])} - {_g(b['band_p95'])} (median {_g(b['band_p50'])}, {b['n_samples']} samples)"
                   + (f"; paper {_g(b['paper'])}: {b['class']}" if b["paper"] is not None else ""))
    click.echo("wrote " + ", ".join(str(p) for p in res.written))
    return 100 + min(res.failed, 99) if res.failed else 0


def _g(v: Any) -> str:
    return "-" if v is None else f"{v:.3g}"


@main.command()
@click.argument("scenarios", nargs=-1, required=True, type=click.Path(dir_okay=False), metavar="SCENARIO...")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE",
              help="Override a field of every scenario (the candidate thresholds when no --from is given).")
@click.option("--from", "from_dir", default=None, metavar="SEARCH_DIR",
              help="Candidates from a search folder: its recommended.json, then its front.csv by rank.")
@click.option("--front", type=click.IntRange(0, 10_000), default=None,
              help="With --from: at most N front points besides the recommended one (default: the whole front).")
@click.option("--seeds", default=None, metavar="SEEDS",
              help="Held-out seeds, a list or a range (70001-70010): disjoint from the search's and --tuned-on's.")
@click.option("--tuned-on", "tuned_on", default=None, metavar="SEEDS",
              help="Seeds the --set thresholds were chosen on (refused as held-out seeds).")
@click.option("--constraint", "constraints", multiple=True, metavar="'TERM<=V'",
              help="P(collapse)<=0.01, false_isolations_per_healthy<=0.01, detection.missed==0, max(METRIC)<=V, "
                   "... (docs/verdict.md; repeatable). Default: those three.")
@click.option("--bands", default=None, metavar="STUDY_DIR",
              help="Assumption samples from a stored meshsim uncertainty study (its top factors); default: a "
                   "Latin hypercube over every range of the backend profile.")
@click.option("--samples", type=click.IntRange(0, 100_000), default=20, show_default=True,
              help="Assumption samples per candidate and size (0: no band).")
@click.option("--band-seeds", type=click.IntRange(1, 100_000), default=3, show_default=True,
              help="Held-out seeds (the first ones) each assumption sample runs.")
# deliberate repetition: uncertainty writes out the same options with help texts of its own (issue 31)
@click.option("--design-seed", type=SEED, default=1, show_default=True, help="Seed of the Latin hypercube.")
@click.option("--budget", type=click.IntRange(1, 100_000_000), default=None,
              help="Refuse before starting when the plan holds more runs.")
@click.option("--smoke", is_flag=True, help="Apply each scenario's 'smoke' overrides (small runs).")
@click.option("--out", "-o", type=click.Path(file_okay=False), default=None,
              help="Folder (default: runs/verdict-<first scenario name>); rerunning resumes it.")
@_executor_options
@click.option("--dry-run", is_flag=True, help="Check everything, print the plan and stop (writes nothing).")
@click.option("--quiet", "-q", is_flag=True, help="No progress display.")
def verdict(scenarios: tuple[str, ...], sets: tuple[str, ...], from_dir: str | None, front: int | None,
            seeds: str | None, tuned_on: str | None, constraints: tuple[str, ...], bands: str | None, samples: int,
            band_seeds: int, design_seed: int, budget: int | None, smoke: bool, out: str | None,
            workers: int | None, executor: str, scheduler: str | None, dry_run: bool, quiet: bool) -> int:
    """Candidate thresholds on held-out seeds and over the assumption ranges, at one or several sizes:
    every measure with its 95 % interval, worst seed and band, and PASS / FAIL per constraint
    (docs/verdict.md). Writes OUT/verdict.json and verdict.md; resumable. Exit 0 all PASS, 4 some FAIL,
    100 + failed runs, 2 bad input."""
    from ..verdict import console_lines, folder_status, plan_verdict, run_verdict, seeds_text

    if scheduler and executor != "dask":
        raise InputError("--scheduler goes with --executor dask", field="--scheduler", value=scheduler)
    plan = plan_verdict(list(scenarios), sets, from_dir, seeds, constraints, bands, samples, band_seeds, front,
                        tuned_on, design_seed, smoke, budget)
    out_dir = Path(out) if out else Path("runs") / f"verdict-{_safe(plan.sizes[0].name)}"

    def announce(done: int) -> None:
        sizes = ", ".join(f"{s.name} ({s.agents} agents)" for s in plan.sizes)
        cands = ", ".join(c.name for c in plan.candidates)
        click.echo(f"verdict: {len(plan.sizes)} size{'s' if len(plan.sizes) != 1 else ''} ({sizes}) x "
                   f"{len(plan.candidates)} candidate{'s' if len(plan.candidates) != 1 else ''} ({cands}): "
                   f"{len(plan.seeds)} held-out seeds ({seeds_text(plan.seeds)}) + "
                   + (f"{len(plan.positions)} assumption samples x {len(plan.band_seeds)} seeds" if plan.positions
                      else "no assumption band")
                   + f" = {plan.runs} runs"
                   + (f", {done} already done" if done else "") + (f" (budget {budget})" if budget else "")
                   + f" -> {out_dir}/")
        for w in plan.warnings:
            click.echo(f"warning: {w}", err=True)

    if dry_run:
        done, refused = folder_status(plan, out_dir)
        if refused:
            raise InputError(refused)
        announce(done)
        click.echo("constraints: " + ", ".join(c.text for c in plan.constraints))
        return 0
    res = run_verdict(plan, out_dir, executor=executor, workers=workers, scheduler=scheduler, quiet=quiet,
                      echo=(lambda m: None) if quiet else (lambda m: click.echo(m, err=True)), announce=announce)
    for line in console_lines(res.verdict):
        click.echo(line)
    click.echo("wrote " + ", ".join(str(p) for p in res.written))
    if res.failed:
        return 100 + min(res.failed, 99)
    return 0 if res.verdict["result"] == "PASS" else 4
