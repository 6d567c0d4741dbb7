"""``meshsim run``, ``validate``, ``topology``, ``schema``, ``scenarios`` and ``explain``: one scenario, its
check, its graph and what a finished run folder says."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ..core.errors import InputError
from ..scenario.fields import CONFIRM_RUNS, SEEDS_HELP, check_plan_runs
from .app import _load, _need_plotting, _notes, _seed_text, _seeds_text, main, SEED


@main.command()
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--seed", type=SEED, default=None,
              help="Run this one seed (default: the scenario's seeds); with seeds > 1 it goes to OUT/seed-N/.")
@click.option("--seeds", "seeds", default=None, metavar="SEEDS",
              help=f"Run these seeds instead of the scenario's: {SEEDS_HELP}.")
@click.option("--yes", is_flag=True, help=f"Run a plan of more than {CONFIRM_RUNS:,} runs (refused without it).")
@click.option("--out", "-o", type=click.Path(file_okay=False), default=None,
              help="Run folder (default: runs/<scenario name>).")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE",
              help="Override a scenario field, e.g. --set network.links.loss=0.1 (repeatable).")
@click.option("--force", is_flag=True,
              help="Re-run seeds the folder holds completed runs of (another scenario, or changed inputs).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no summary on stdout.")
@click.option("--smoke", is_flag=True, help="Apply the scenario's 'smoke' overrides: a small, quick run.")
@click.option("--plot", "make_report", is_flag=True, help="Write OUT/report.html (tables and figures) after the run.")
@click.option("--max-failed-calls", "max_failed", default=0.5, show_default=True, type=click.FloatRange(0.0, 1.0),
              help="Exit 3 when a larger share of a seed's LLM calls failed (HTTP errors, timeouts, unparsable "
                   "replies), or when no task was answered.")
def run(scenario: str, seed: int | None, seeds: str | None, out: str | None, sets: tuple[str, ...], force: bool,
        quiet: bool, smoke: bool, make_report: bool = False, max_failed: float = 0.5, yes: bool = False) -> int:
    """Run SCENARIO and write its run folder (SCENARIO: a file, or a shipped example's name, see
    'meshsim scenarios')."""
    from ..simulate.runner import run as run_api
    from ..core.bundled import scenario_arg

    scenario = scenario_arg(scenario)

    if make_report:
        _need_plotting()  # before any work: not after an hour of simulation
    if seeds is not None:
        if seed is not None:
            raise InputError("give --seed or --seeds, not both", field="--seeds", value=seeds)
        sets = tuple(sets) + (f"seeds={_seeds_text(seeds)}",)
    sc = _load(scenario, sets, smoke)
    out_dir = Path(out) if out else Path("runs") / sc.folder_name()
    planned = [seed] if seed is not None else sc.seed_list()
    check_plan_runs(len(planned), yes, "--seeds" if seeds is not None else "seeds",
                    seeds if seeds is not None else len(planned), file=None if seeds is not None else scenario)
    # The plan's size before any work (issue 29), printed when the clock starts, i.e. after every
    # check passed: an invalid scenario still gets its one error line only.
    plan_line = [f"{sc.name}: {len(planned)} runs ({_seed_text(planned)}) -> {out_dir}/"] \
        if len(planned) > 1 and not quiet else []
    show = not quiet and sys.stderr.isatty()
    if show:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                      TextColumn("{task.percentage:>5.1f}%"), TimeElapsedColumn(), TextColumn("ETA"),
                      TimeRemainingColumn(), transient=True) as bar:
            task = bar.add_task(sc.name, total=1.0)

            def progress(kind: str, done: float, total: float) -> None:
                if plan_line:
                    bar.console.print(plan_line.pop(), highlight=False)
                bar.update(task, completed=(done / total) if total else 0)

            result = run_api(sc, seed=seed, out=out_dir, progress=progress, force=force, seed_folder=True)
    elif not quiet:
        from ..simulate.console import ProgressLines

        # off a terminal (a log, CI): one plain line every console.PROGRESS_EVERY seconds (issue 32)
        lines = ProgressLines(sc.name, lambda m: click.echo(m, err=True), seeds=len(planned),
                              first=plan_line[0] if plan_line else None)
        result = run_api(sc, seed=seed, out=out_dir, progress=lines, force=force, seed_folder=True)
    else:
        result = run_api(sc, seed=seed, out=out_dir, force=force, seed_folder=True)
    _notes(sc, result=result)  # after the run's own checks: an invalid scenario gets its one error line only
    if not quiet:
        _print_result(result, out_dir, sc)
    if make_report:
        from ..plots.report import write_report

        path = write_report(out_dir)
        if not quiet:
            click.echo(f"report -> {path}")
    if not quiet:
        _next_steps(result, out_dir, make_report)
    return _loud_failures(result, max_failed)


def _call_failures(summary: dict) -> tuple[int, int, dict[str, int]]:
    """(failed calls, calls, failures by cause) of a run's backend, wherever a
    wrapper (replay) keeps them."""
    b = summary.get("backend") or {}
    calls = b.get("calls") if isinstance(b.get("calls"), int) else (b.get("inner") or {}).get("calls", 0)
    errors = dict(b.get("errors") or (b.get("inner") or {}).get("errors") or {})
    unparsed = b.get("unparsed_replies", (b.get("inner") or {}).get("unparsed_replies", 0)) or 0
    if unparsed:
        errors["unparsable reply"] = errors.get("unparsable reply", 0) + int(unparsed)
    return sum(int(v) for v in errors.values()), int(calls or 0), errors


def _loud_failures(result: Any, limit: float) -> int:
    """Issue 19: a run whose calls mostly failed, or that answered nothing, does
    not exit 0 in silence. One stderr line per such seed; exit 3 (results are
    written: they are what happened)."""
    runs = getattr(result, "runs", None) or [result]
    bad = 0
    for r in runs:
        s = r.summary or {}
        failed, calls, errors = _call_failures(s)
        tasks, unanswered = s.get("tasks"), s.get("unanswered")
        why = []
        if calls and failed / calls > limit:
            causes = ", ".join(f"{k} {v}" for k, v in sorted(errors.items(), key=lambda kv: -kv[1]))
            why.append(f"{failed} of {calls} LLM calls failed ({causes}), above --max-failed-calls {limit:g}")
        if isinstance(tasks, int) and tasks > 0 and unanswered == tasks:
            why.append(f"no task was answered (all {tasks} unanswered)")
        if why:
            bad += 1
            click.echo(f"error: seed {r.seed}: " + "; ".join(why), err=True)
    return 3 if bad else 0


def _print_result(result: Any, out_dir: Path, sc: Any = None) -> None:
    """Each seed's results in words (meshsim.simulate.console: what a number counts, what the paper says)."""
    from ..simulate.console import false_isolation_reference, seed_lines
    from ..simulate.runner import MultiRunResult

    ref = false_isolation_reference(sc) if sc is not None else None
    if isinstance(result, MultiRunResult):
        click.echo(f"{len(result.runs)} seeds -> {out_dir}/ (aggregate.json: mean and sd over seeds)")
        for r in result.runs:
            first, *rest = seed_lines(r.summary, r.out, ref)
            click.echo(f"  seed {r.seed}: {first}" + (" (resumed)" if r.resumed else ""))
            for line in rest:
                click.echo(f"    {line}")
            if r.transport:
                click.echo(f"    {_transport_line(r.transport)}")
    else:
        click.echo(f"seed {result.seed} -> {result.out or out_dir}/" + (" (resumed)" if result.resumed else ""))
        for line in seed_lines(result.summary, result.out, ref):
            click.echo(f"  {line}")
        if result.transport:
            click.echo(f"  {_transport_line(result.transport)}")


def _next_steps(result: Any, out_dir: Path, report_written: bool) -> None:
    """The end of a run: its folder and the commands that show it."""
    from ..simulate.console import next_steps

    runs = getattr(result, "runs", None) or [result]
    explain = any(((r.summary or {}).get("detection") or {}).get("false_isolations") for r in runs)
    for line in next_steps(Path(getattr(result, "out", None) or out_dir), report_written, explain, _prog()):
        click.echo(line)


def _prog() -> str:
    """How to call meshsim again: as typed (``.venv/bin/meshsim`` from README's first command) unless
    ``meshsim`` on PATH is that same program."""
    import os
    import shutil

    typed = sys.argv[0] if sys.argv else ""
    if os.path.basename(typed) != "meshsim" or os.sep not in typed:
        return "meshsim"
    found = shutil.which("meshsim")
    try:
        if found and os.path.samefile(found, typed):
            return "meshsim"
    except OSError:
        pass
    return typed


def _transport_line(t: dict) -> str:
    """How the LLM calls were served (not part of the run folder when recorded)."""
    parts = []
    if "mode" in t:
        parts.append(f"cassette {t['mode']}: {t.get('hits', 0)} replayed, {t.get('recorded', 0)} recorded")
    wire = t.get("inner", t)
    if wire.get("calls"):
        failed = sum(int(v) for v in (wire.get("errors") or {}).values())
        parts.append(f"{wire['calls']} calls on the wire in {wire.get('wall_seconds', 0):.1f} s, "
                     f"{wire.get('retries', 0)} retries" + (f", {failed} failed" if failed else ""))
    if "max_in_flight" in t:
        parts.append(f"up to {t['max_in_flight']} in flight")
    return "backend: " + ("; ".join(parts) if parts else "no calls")


def _headline(s: dict) -> str:
    """A seed's results on one line (meshsim.simulate.console.seed_lines joined)."""
    from ..simulate.console import seed_lines

    return "; ".join(seed_lines(s))


@main.command()
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--seed", type=SEED, default=None, help="Check this one seed (default: every seed of the scenario).")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", help="Override a field first.")
@click.option("--smoke", is_flag=True, help="Apply the scenario's 'smoke' overrides first.")
def validate(scenario: str, seed: int | None, sets: tuple[str, ...], smoke: bool) -> None:
    """Check SCENARIO without running it: every step 'run' takes before the
    clock starts (file, model, graph and event schedule of every seed, building
    the world, one request to each real LLM endpoint); exit 0 or 2."""
    from ..simulate.runner import validate as check
    from ..core.bundled import scenario_arg

    scenario = scenario_arg(scenario)  # a file, or a shipped example's name
    sc = _load(scenario, sets, smoke)
    info = check(sc, seed)
    _notes(sc, info.get("links"))
    for w in info.get("warnings", ()):
        click.echo(f"warning: {w}", err=True)
    n = len(info["seeds"])
    click.echo(f"ok: {scenario}: '{sc.name}', {info['agents']} agents, {info['links']} links, "
               f"{len(sc.events)} events, protocol {sc.protocol.name}" + (f", {n} seeds" if n > 1 else ""))
    if sc.sweep is not None:  # the sweep section too: its spec and every point of its grid
        from ..sweep import plan_sweep

        plan = plan_sweep(scenario, sets=sets)
        click.echo(f"ok: sweep: {len(plan.points)} points x {len(plan.seeds)} seeds = {len(plan.runs)} runs"
                   + (f", {len(plan.skipped)} invalid points skipped" if plan.skipped else ""))


@main.command()
@click.argument("source", type=click.Path())
@click.option("--seed", type=SEED, default=None, help="Seed for a random topology (default: the scenario's).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", help="Override a scenario field first.")
@click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=10.0, show_default=True,
              metavar="S", help="Seconds for deciding r-robustness; a graph not settled by then reads "
                                "'undecided within S s' with the bounds found.")
def topology(source: str, seed: int | None, as_json: bool, sets: tuple[str, ...], time_limit: float = 10.0) -> None:
    """Describe the graph of a scenario file or a topology file (GraphML / edge list),
    r-robustness included (SAC Def. 3.3; any size, within --time-limit)."""
    from .. import graphs as topo
    from ..scenario.model import build_graph

    path = Path(source)
    if path.suffix.lower() in (".yaml", ".yml"):
        G = build_graph(_load(source, sets), seed)
    else:
        if not path.exists():
            raise InputError("file not found", file=source)
        G = topo.from_file(path)
    info = topo.describe(G)
    if not G.is_directed():
        from ..graphs import robustness

        # bounds, enumeration up to 16 nodes, else the MILP within the time limit (never silently omitted)
        rep = robustness.robustness_report(G, 0, time_limit=time_limit)
        info["r_robustness"] = rep["r_robustness"]
        info["r_bounds"] = rep["r_bounds"]
        info["r_method"] = rep["r_method"]
        if not as_json and not isinstance(rep["r_robustness"], int):
            lo, hi = rep["r_bounds"]
            info["r_robustness"] = f"{rep['r_robustness']} ({lo} <= r <= {hi})"
    if as_json:
        click.echo(json.dumps(info, indent=2, sort_keys=True))
    else:
        width = max(len(k) for k in info)
        for k, v in info.items():
            click.echo(f"{k:<{width}}  {v:.4g}" if isinstance(v, float) else f"{k:<{width}}  {v}")


@main.command()
def schema() -> None:
    """Print the scenario file's JSON Schema (for editors and other tools)."""
    from ..scenario.model import scenario_schema

    click.echo(json.dumps(scenario_schema(), indent=2, sort_keys=True))


@main.group(invoke_without_command=True)
@click.pass_context
def scenarios(ctx: click.Context) -> None:
    """The example scenarios shipped with meshsim: name, what it runs, the paper section it
    reproduces. 'meshsim run NAME' runs one; 'meshsim scenarios copy NAME [DIR]' copies one to edit."""
    if ctx.invoked_subcommand is not None:
        return
    from ..core.bundled import examples

    rows = examples()
    width = max((len(e.name) for e in rows), default=0)
    for e in rows:
        click.echo(f"{e.name:<{width}}  {e.description}  [{e.section}]")
    click.echo(f"({len(rows)} examples; run one: meshsim run NAME; edit one: meshsim scenarios copy NAME [DIR])",
               err=True)


@scenarios.command("copy")
@click.argument("name")
@click.argument("dest", default=".", required=False, type=click.Path(), metavar="[DIR]")
def scenarios_copy(name: str, dest: str) -> None:
    """Copy the shipped example NAME into DIR (default: the working folder) to edit; never overwrites.
    Its backend profile and dataset are still found by name, unless a backends/ beside it holds yours."""
    from ..core.bundled import copy_example

    click.echo(f"wrote {copy_example(name, dest)}")


@main.command()
@click.argument("run_dir", type=click.Path())
@click.option("--agent", default=None, metavar="NAME", help="Only this agent's isolations (and missed intervals).")
@click.option("--seed", type=SEED, default=None, help="A multi-seed folder: only this seed (default: every seed).")
@click.option("--json", "as_json", is_flag=True, help="The evidence as JSON (one object per seed).")
@click.option("--brief", is_flag=True, help="Per isolation the reviewers only, not the window's outputs.")
def explain(run_dir: str, agent: str | None, seed: int | None, as_json: bool, brief: bool) -> None:
    """Which reviews isolated each agent of a MeshHeal run: per isolation the detector window's
    outputs, who scored them, whether that reviewer was degraded and its own state then, and who was
    pivotal; then the degraded intervals never detected (docs/meshheal.md#collapse)."""
    from ..analysis.evidence import explain_folder, format_explanation, seed_folders

    texts = []
    for f in seed_folders(run_dir, seed):
        ex = explain_folder(f, agent=agent)
        texts.append(json.dumps(ex.to_dict(), sort_keys=True) if as_json else format_explanation(ex, rows=not brief))
    click.echo(("\n" if as_json else "\n\n").join(texts))
