"""``meshsim`` command line: a thin layer over the Python API.

Exit codes: 0 ok, 2 bad input or an unusable environment (one line on stderr
naming file, field and value: a bad scenario, an unreachable endpoint, a
locked, full or read-only run folder), 130 interrupted (Ctrl-C; a rerun
resumes), 1 internal error (a bug).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from .errors import InputError, MeshsimError
from .redact import scrub

#: seeds are 0 .. 2**63-1 (meshsim.fields.MAX_SEED), on the command line too
SEED = click.IntRange(0, 2 ** 63 - 1)


def _fail(exc: BaseException, code: int) -> None:
    click.echo(scrub(f"error: {exc}"), err=True)
    sys.exit(code)


def _interrupted(message: str = "interrupted") -> None:
    click.echo(message, err=True)
    sys.exit(130)


def _refuse_unwritable_args(argv: Any) -> None:
    """An argument with a byte that is not UTF-8 (Python holds it as a lone
    surrogate) could never be written into the outputs that record it: one
    line, exit 2, before anything runs (issue 19)."""
    argv = list(argv or ())
    for i, arg in enumerate(argv):
        if isinstance(arg, str) and not arg.isascii():
            try:
                arg.encode("utf-8")
            except UnicodeEncodeError:
                prev = argv[i - 1] if i and isinstance(argv[i - 1], str) and argv[i - 1].startswith("-") else None
                shown = arg.encode("utf-8", "backslashreplace").decode("ascii", "replace")
                click.echo(f"error: {prev or f'argument {i + 1}'}: text holds a lone surrogate or a byte that is not "
                           f"UTF-8 ({shown}); it could not be written into the outputs", err=True)
                sys.exit(2)


class _Group(click.Group):
    def main(self, args=None, prog_name=None, **kwargs):  # type: ignore[override]
        _refuse_unwritable_args(sys.argv[1:] if args is None else args)
        try:
            rv = super().main(args=args, prog_name=prog_name, standalone_mode=False, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.Abort as exc:
            # click turns Ctrl-C outside a run (while loading, say) into Abort
            if isinstance(exc.__cause__, KeyboardInterrupt):
                _interrupted()
            click.echo("error: aborted", err=True)
            sys.exit(1)
        except click.ClickException as exc:
            # one line, not click's three-line usage block
            ctx_hint = ""
            if isinstance(exc, click.UsageError) and exc.ctx is not None:
                ctx_hint = f" (see '{exc.ctx.command_path} --help')"
            click.echo(f"error: {exc.format_message()}{ctx_hint}", err=True)
            sys.exit(2)
        except MeshsimError as exc:
            if exc.exit_code == 130:  # runner.Interrupted: "interrupted: N of M seeds complete, ..."
                _interrupted(str(exc))
            _fail(exc, exc.exit_code)
        except KeyboardInterrupt:
            _interrupted()
        except OSError as exc:  # the environment (a disk, a permission), not a bug: name the path and the reason
            where = f"{exc.filename}: " if exc.filename else ""
            _fail(f"{where}{exc.strerror or exc}", 2)  # type: ignore[arg-type]
        except Exception as exc:  # a bug: say so in one line, traceback on request
            if os.environ.get("MESHSIM_DEBUG"):
                raise
            click.echo(f"error: internal error: {type(exc).__name__}: {exc} "
                       "(set MESHSIM_DEBUG=1 for the traceback)", err=True)
            sys.exit(1)
        if isinstance(rv, int) and rv:
            sys.exit(rv)
        sys.exit(0)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="meshsim")
def main() -> None:
    """Simulate decentralized LLM agent networks under gray failures and Byzantine faults."""


def _load(path: str, sets: tuple[str, ...], smoke: bool = False):
    from .scenario import load_scenario

    return load_scenario(path, list(sets), smoke=smoke)


def _notes(sc: Any, links: Any = None, result: Any = None) -> None:
    """A valid scenario whose run can do nothing says so (issue 19: no silent
    degenerate run): the notes of a finished run's summaries, else the scenario's."""
    from .degenerate import degenerate_notes

    if result is not None:
        notes: list = []
        for r in getattr(result, "runs", None) or [result]:
            notes += [n for n in (r.summary or {}).get("notes", []) if n not in notes]
    else:
        notes = degenerate_notes(sc, links)
    for note in notes:
        click.echo(f"note: {sc.source}: {note}", err=True)


@main.command()
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--seed", type=SEED, default=None,
              help="Run this one seed (default: the scenario's seeds); with seeds > 1 it goes to OUT/seed-N/.")
@click.option("--seeds", "seeds", default=None, metavar="SEEDS",
              help="Run these seeds instead of the scenario's: a count N, a list 1,5,9 or a range 9301-9320.")
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
        quiet: bool, smoke: bool, make_report: bool = False, max_failed: float = 0.5) -> int:
    """Run SCENARIO and write its run folder."""
    from .runner import run as run_api

    if make_report:
        _need_plotting()  # before any work: not after an hour of simulation
    if seeds is not None:
        if seed is not None:
            raise InputError("give --seed or --seeds, not both", field="--seeds", value=seeds)
        sets = tuple(sets) + (f"seeds={_seeds_text(seeds)}",)
    sc = _load(scenario, sets, smoke)
    out_dir = Path(out) if out else Path("runs") / sc.folder_name()
    show = not quiet and sys.stderr.isatty()
    if show:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                      TextColumn("{task.percentage:>5.1f}%"), TimeElapsedColumn(),
                      transient=True) as bar:
            task = bar.add_task(sc.name, total=1.0)

            def progress(kind: str, done: float, total: float) -> None:
                bar.update(task, completed=(done / total) if total else 0)

            result = run_api(sc, seed=seed, out=out_dir, progress=progress, force=force, seed_folder=True)
    else:
        result = run_api(sc, seed=seed, out=out_dir, force=force, seed_folder=True)
    _notes(sc, result=result)  # after the run's own checks: an invalid scenario gets its one error line only
    if not quiet:
        _print_result(result, out_dir)
    if make_report:
        from .plots.report import write_report

        path = write_report(out_dir)
        if not quiet:
            click.echo(f"report -> {path}")
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


def _seeds_text(text: str) -> str:
    """``--seeds`` as a ``seeds=`` override value (checked here, so the error names the option)."""
    from .fields import parse_seeds

    try:
        v = parse_seeds(text)
    except ValueError as exc:
        raise InputError(str(exc), field="--seeds", value=text) from None
    return json.dumps(v)


def _need_plotting() -> None:
    from .plots.canvas import require_matplotlib

    require_matplotlib()


def _safe(name: str) -> str:
    """One path component made of ``name`` (as ``Scenario.folder_name``): no
    separators, no leading dot, so ``runs/<it>`` stays inside ``runs/``."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "-" for c in name)
    return safe.lstrip(".")[:128] or "run"


def _print_result(result: Any, out_dir: Path) -> None:
    from .runner import MultiRunResult

    if isinstance(result, MultiRunResult):
        click.echo(f"{len(result.runs)} seeds -> {out_dir}/ (aggregate.json)")
        for r in result.runs:
            click.echo(f"  seed {r.seed}: {_headline(r.summary)}" + (" (resumed)" if r.resumed else ""))
            if r.transport:
                click.echo(f"    {_transport_line(r.transport)}")
    else:
        click.echo(f"seed {result.seed} -> {result.out or out_dir}/" + (" (resumed)" if result.resumed else ""))
        click.echo(f"  {_headline(result.summary)}")
        if result.transport:
            click.echo(f"  {_transport_line(result.transport)}")


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
    parts = [f"sim_time={s.get('sim_time', 0):.1f}s",
             f"messages={s.get('messages', {}).get('total', {}).get('sent', 0)}"]
    acc = s.get("accuracy", {})
    if isinstance(acc, dict) and "overall" in acc:
        parts.append(f"accuracy={acc['overall']:.3f}")
    if "routing" in s:
        parts.append(f"tables_correct_at_end={s['routing']['tables_correct_at_end']}")
    # SAC / CP-WBFT (SAC Tab. 1): initial and final honest accuracy, their gap, majority
    for key, label in (("iaa", "IAA"), ("faa", "FAA"), ("bfti", "BFTI"), ("h_majority", "H-Majority")):
        v = s.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            parts.append(f"{label}={v:+.3f}" if key == "bfti" else f"{label}={v:.3f}")
    agents = s.get("agents")
    det = s.get("detection") if isinstance(s.get("detection"), dict) else {}
    if isinstance(agents, dict) and 0 < len(agents) <= 4:
        for name, a in agents.items():
            if isinstance(a, dict) and "detection_delay" in a:
                own = a.get("detection_delay_outputs")
                parts.append(f"{name}: detected+{a['detection_delay']}"
                             + (f" ({own} own outputs)" if own is not None else "")
                             + f" closure={a['closure']} reintegrated+{a.get('reintegration_delay')}")
        # a degraded agent already isolated (falsely) when it degrades shows detected+0:
        # the healthy isolations say why (detection.false_isolations: one definition everywhere)
        if isinstance(det.get("false_isolations"), int):
            parts.append(f"false_isolations={det['false_isolations']}")
    elif isinstance(agents, dict) and agents:
        parts.append(f"isolated {sum(1 for a in agents.values() if a.get('isolated_at') is not None)}/{len(agents)}"
                     f" degraded, false_isolations={det.get('false_isolations')}")
        if isinstance(det.get("delay_mean"), (int, float)) and isinstance(det.get("delay_outputs_mean"), (int, float)):
            parts.append(f"delay_mean={det['delay_mean']:.1f} tasks ({det['delay_outputs_mean']:.1f} own outputs)")
    from .collapse import collapse_clause

    clause = collapse_clause(s)
    if clause:
        parts.append(clause)
    return " ".join(parts)


@main.command()
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--seed", type=SEED, default=None, help="Check this one seed (default: every seed of the scenario).")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", help="Override a field first.")
@click.option("--smoke", is_flag=True, help="Apply the scenario's 'smoke' overrides first.")
def validate(scenario: str, seed: int | None, sets: tuple[str, ...], smoke: bool) -> None:
    """Check SCENARIO without running it: every step 'run' takes before the
    clock starts (file, model, graph and event schedule of every seed, building
    the world, one request to each real LLM endpoint); exit 0 or 2."""
    from .runner import validate as check

    sc = _load(scenario, sets, smoke)
    info = check(sc, seed)
    _notes(sc, info.get("links"))
    n = len(info["seeds"])
    click.echo(f"ok: {scenario}: '{sc.name}', {info['agents']} agents, {info['links']} links, "
               f"{len(sc.events)} events, protocol {sc.protocol.name}" + (f", {n} seeds" if n > 1 else ""))
    if sc.sweep is not None:  # the sweep section too: its spec and every point of its grid
        from .sweep import plan_sweep

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
    from . import graphs as topo
    from .scenario import build_graph

    path = Path(source)
    if path.suffix.lower() in (".yaml", ".yml"):
        G = build_graph(_load(source, sets), seed)
    else:
        if not path.exists():
            raise InputError("file not found", file=source)
        G = topo.from_file(path)
    info = topo.describe(G)
    if not G.is_directed():
        from .graphs import robustness

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
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(), metavar="RUN_DIR...")
@click.option("--kind", type=click.Choice(["timeline", "heatmap", "phases", "detector", "sac", "topology",
                                           "tradeoff", "sensitivity", "parallel"]),
              default=None, help="Figure (default: timeline for MeshHeal runs, sac for SAC runs, tradeoff for "
                                 "a MeshHeal sweep folder).")
@click.option("--agents", default=None, metavar="A3,A5", help="Agents to show (timeline, heatmap, detector).")
@click.option("--seed", type=int, default=None, help="Seed of a multi-seed folder (default: its first).")
@click.option("--x", "x", default=None, metavar="PARAM", help="Sweep folders: swept parameter on the x axis "
              "(heatmap, sensitivity; a unique last component such as 'alpha' will do).")
@click.option("--y", "y", default=None, metavar="PARAM", help="Sweep folders: swept parameter on the y axis (heatmap).")
@click.option("--metric", default=None, metavar="COLUMN", help="Sweep folders: a results.csv metric column "
              "(heatmap, sensitivity; default detection.delay_mean).")
@click.option("--by", default=None, metavar="PARAM", help="Sweep folders: one line per value of this parameter "
              "(sensitivity).")
@click.option("--where", "where", multiple=True, metavar="PATH=VALUE",
              help="Sweep folders: only the points at this value of a swept parameter (repeatable).")
@click.option("--facet", default=None, metavar="PARAM",
              help="Sweep folders: one panel per value of this swept parameter (tradeoff, heatmap, sensitivity).")
@click.option("--color", default=None, metavar="COLUMN", help="Sweep folders: the metric colouring the lines "
              "(parallel).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="Figure file: .png, .pdf or .svg (default: RUN_DIR/<kind>.png).")
def plot(run_dirs: tuple[str, ...], kind: str | None, agents: str | None, seed: int | None, x: str | None,
         y: str | None, metric: str | None, by: str | None, out: str | None, where: tuple[str, ...] = (),
         facet: str | None = None, color: str | None = None) -> None:
    """Draw a figure of RUN_DIR (several RUN_DIRs for --kind sac) or of a sweep
    folder (--kind tradeoff, heatmap, sensitivity, parallel); see docs/plots.md and docs/sweeps.md."""
    from . import plots
    from .sweep import is_sweep_folder

    _need_plotting()
    if out is not None:
        plots.check_figure_path(out)
    if is_sweep_folder(run_dirs[0]):
        from .plots.sweeps import render_sweep

        if len(run_dirs) > 1 or agents or seed is not None:
            raise InputError("a sweep folder takes one folder and no --agents / --seed", field="RUN_DIR",
                             value=list(run_dirs))
        path = render_sweep(run_dirs[0], kind, x=x, y=y, metric=metric, by=by, out=out, where=where, facet=facet,
                            color=color)
        click.echo(f"wrote {path}")
        return
    if kind in ("tradeoff", "sensitivity", "parallel") or x or y or metric or by or where or facet or color:
        raise InputError("--kind tradeoff / sensitivity / parallel and --x, --y, --metric, --by, --where, --facet, "
                         "--color take a sweep folder (meshsim sweep)", file=run_dirs[0])

    path = plots.render(list(run_dirs), kind=kind, agents=plots.parse_agents(agents), seed=seed, out=out)
    click.echo(f"wrote {path}")
    if kind == "phases":
        from .plots.report import healing_table, phase_table, print_tables, write_tables

        tabs = [t for t in (phase_table(run_dirs[0]), healing_table(run_dirs[0])) if t is not None]
        print_tables(tabs)
        for p in write_tables(tabs, path.parent, md_name=f"{path.stem}.md", prefix=f"{path.stem}-"):
            click.echo(f"wrote {p}")


@main.command()
@click.argument("scenario", type=click.Path(dir_okay=False), required=False)
@click.option("--grid", "grid", multiple=True, metavar="PATH=VALUES",
              help="A swept parameter: a range START:STOP:STEP (both ends included), a list 1.5,2,3 or [..], "
                   "or one value (repeatable: the cartesian product). Replaces the file's sweep section axes.")
@click.option("--zip", "zips", multiple=True, metavar="PATH=VALUES",
              help="Parameters that vary together (every --zip axis takes its i-th value at once).")
@click.option("--seeds", default=None, metavar="SEEDS",
              help="Seeds of every point: a range 9301-9320, a list 1,5,9 or a count N (default: the spec's, "
                   "else the scenario's topped up to 5 consecutive seeds).")
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
def sweep(scenario: str | None, grid: tuple[str, ...], zips: tuple[str, ...], seeds: str | None, sets: tuple[str, ...],
          out: str | None, workers: int | None, executor: str, scheduler: str | None, output: str | None,
          smoke: bool, dry_run: bool, quiet: bool, reference: tuple[str, ...] = ()) -> int:
    """Run SCENARIO over a grid of parameters and seeds (docs/sweeps.md).

    Writes OUT/manifest.json, one folder per run under OUT/runs/, and the tidy
    OUT/results.csv and OUT/summary.csv. Without SCENARIO, --out DIR reruns
    DIR's last sweep command (options given here replace its own; the folder
    rules say which changes extend it and which are refused). Exit 0 when
    every run finished; 100 + the number of failed runs (at most 199)
    otherwise; 2 for bad input; 143 on SIGTERM, 130 on Ctrl-C."""
    from .sweep import plan_sweep, point_label, resume_args, run_sweep, short_names

    if scheduler and executor != "dask":
        raise InputError("--scheduler goes with --executor dask", field="--scheduler", value=scheduler)
    if scenario is None:
        if out is None:
            raise InputError("give a SCENARIO, or --out DIR of a sweep folder to resume it", field="SCENARIO")
        args = resume_args(out)
        if grid or zips:  # new axes replace the stored ones, as they replace a file's
            args["grid"], args["zips"] = list(grid), list(zips)
        scenario = args["path"]
        seeds = seeds if seeds is not None else args["seeds"]
        sets = tuple(args["sets"]) + tuple(sets)
        output = output or args["output"]
        smoke = smoke or args["smoke"]
        grid, zips = tuple(args["grid"]), tuple(args["zips"])
    plan = plan_sweep(scenario, grid, zips, seeds, sets, output, smoke)
    if reference:  # checked before any run: a typo must not cost the sweep
        from .sweep.slices import parse_fixes

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
    return 100 + min(res.failed, 99) if res.failed else 0


def _sweep_dry_run(plan: Any, out_dir: Path, names: dict, announce: Any) -> int:
    """``meshsim sweep --dry-run``: every point with its done / pending seeds in
    the folder, the skipped points, and the refusal a real run would meet."""
    from .sweep import point_label, sweep_status

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


def plan_point_values(plan: Any, key: str) -> dict:
    return next((p.values for p in plan.points if p.key == key), {})


def _seed_text(seeds: list[int]) -> str:
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return "seed" + ("s " if len(seeds) != 1 else " ") + ",".join(map(str, seeds))


@main.command()
def schema() -> None:
    """Print the scenario file's JSON Schema (for editors and other tools)."""
    from .scenario import scenario_schema

    click.echo(json.dumps(scenario_schema(), indent=2, sort_keys=True))


@main.command()
@click.argument("run_dir", type=click.Path())
@click.option("--seed", type=int, default=None, help="Seed for the per-seed figures (default: the first).")
@click.option("--where", "where", multiple=True, metavar="PATH=VALUE",
              help="Sweep folders: report only the points at this value of a swept parameter (repeatable).")
@click.option("--facet", default=None, metavar="PARAM",
              help="Sweep folders: one panel per value of this parameter in the trade-off, heat maps and curves.")
@click.option("--reference", "reference", multiple=True, metavar="PATH=VALUE,...",
              help="Sweep folders: the point the table's paired differences compare with (default: the "
                   "scenario's own values that are grid values).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="Sweep folders: the report file (default: SWEEP_DIR/report.html).")
def report(run_dir: str, seed: int | None, where: tuple[str, ...] = (), facet: str | None = None,
           reference: tuple[str, ...] = (), out: str | None = None) -> None:
    """Write RUN_DIR/report.html: scenario, tables and figures in one self-contained file
    (a sweep folder: trade-off, parallel coordinates, every parameter's effect, heat maps and the
    per-point table with intervals)."""
    from .plots.report import write_report
    from .sweep import is_sweep_folder

    _need_plotting()
    if is_sweep_folder(run_dir):
        from .plots.sweeps import write_sweep_report

        path = write_sweep_report(run_dir, out, where=where, facet=facet, reference=list(reference) or None)
        click.echo(f"wrote {path}")
        return
    if where or facet or reference or out:
        raise InputError("--where, --facet, --reference and --out take a sweep folder (meshsim sweep)",
                         file=run_dir)

    click.echo(f"wrote {write_report(run_dir, seed=seed)}")


@main.group()
def backends() -> None:
    """LLM backends: explain, calibrate and fit fake profiles (docs/backends.md)."""


@backends.command("fit")
@click.argument("source", type=click.Path(), metavar="CASSETTE_OR_RUN")
@click.option("--out", "-o", type=click.Path(dir_okay=False), required=True, help="Profile YAML to write.")
@click.option("--name", default=None, help="Profile name (default: the output file's stem).")
@click.option("--base", default=None, help="Profile supplying what the calls cannot (default: fake-default).")
@click.option("--check/--no-check", default=True, show_default=True,
              help="With a run folder: re-run its scenario with the fitted profile and compare "
                   "accuracy per task type with the recorded run.")
@click.option("--draws", default=20, show_default=True, type=click.IntRange(1, 10000),
              help="Independent model-outcome draws (backend.draw) simulated for the check.")
@click.option("--calibrate", "rounds", default=6, show_default=True, type=click.IntRange(0, 100),
              help="Rounds tuning per-type accuracy by simulation until the check agrees (0: off).")
@click.option("--tol", default=0.02, show_default=True, type=click.FloatRange(0.0, 1.0),
              help="Calibration stops when every type is within this of the recorded accuracy.")
@click.option("--fail-above", type=click.FloatRange(0.0, 1.0), default=None,
              help="Exit 1 when a type's simulated accuracy differs from the recorded one by more.")
def backends_fit(source: str, out: str, name: str | None, base: str | None, check: bool, draws: int,
                 rounds: int, tol: float, fail_above: float | None) -> None:
    """Estimate a fake profile from a cassette or a recorded run folder."""
    import tempfile

    from .backends.fit import find_cassettes, fit_profile, load_entries, write_profile

    cassettes = find_cassettes(source)
    entries = load_entries(cassettes)
    prof, notes = fit_profile(entries, name=name or Path(out).stem, base=base,
                              cassette_name=", ".join(c.name for c in cassettes))
    for n in notes:
        click.echo(f"  {n}")
    rows = None
    from .records import has_records

    if check and Path(source).is_dir() and has_records(Path(source), "tasks.jsonl"):
        from . import fitcheck

        with tempfile.TemporaryDirectory(prefix="meshsim-fit-") as tmp:
            prof, rows = fitcheck.calibrate(source, prof, Path(tmp), rounds=rounds, draws=draws, tol=tol,
                                            progress=lambda m: click.echo(f"  calibrate {m}", err=True))
        notes.append(f"check: the recorded scenario re-run with this profile, {draws} draws "
                     f"({rounds} calibration rounds at most):")
        for r in rows:
            notes.append(_fit_row(r))
    path = write_profile(prof, notes, out)
    if rows is not None:
        click.echo(f"  {'type':<40} {'tasks':>5} {'recorded':>9} {'simulated':>9} {'diff':>7}")
        for r in rows:
            click.echo(f"  {_fit_row(r)}")
    click.echo(f"wrote {path}")
    if rows is not None and fail_above is not None:
        bad = [r for r in rows if r["diff"] is not None and abs(r["diff"]) > fail_above]
        if bad:
            click.echo(f"error: {source}: simulated accuracy of {bad[0]['type']!r} differs from the recorded "
                       f"one by {bad[0]['diff']:+.3f} (limit {fail_above})", err=True)
            sys.exit(1)


@backends.command("explain")
@click.argument("profile", metavar="PROFILE")
@click.option("--kind", "only", type=click.Choice(["paper", "recording", "calibrated", "assumption", "missing"]),
              default=None, help="Show only numbers whose source is of this kind.")
def backends_explain(profile: str, only: str | None) -> None:
    """Every number of a backend profile with its source (paper, recording,
    calibrated to a mechanism-level target, or assumption)."""
    from .backends import find_profile
    from .backends.provenance import explain_rows, load_profile_data

    path = find_profile(profile, None)
    data = load_profile_data(path)
    rows = explain_rows(data)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["kind"]] = counts.get(r["kind"], 0) + 1
    click.echo(f"{path}: {data.get('name', '')} ({data.get('kind', '?')}), {len(rows)} numbers")
    w = max([len(r["path"]) for r in rows] + [4])
    click.echo(f"  {'path':<{w}} {'value':>10}  {'kind':<10} source")
    for r in rows:
        if only is None or r["kind"] == only:
            v = r["value"]
            vs = f"{v:g}" if isinstance(v, float) else str(v)
            click.echo(f"  {r['path']:<{w}} {vs:>10}  {r['kind']:<10} {r['source']}")
    click.echo("  " + ", ".join(f"{k}: {n}" for k, n in sorted(counts.items())))
    bad = counts.get("missing", 0) + counts.get("?", 0)
    if bad:
        first = next(r["path"] for r in rows if r["kind"] in ("missing", "?"))
        click.echo(f"error: {path}: {bad} number(s) without a source of a known kind, first: {first}", err=True)
        sys.exit(2)


@backends.command("calibrate")
@click.argument("profile", metavar="PROFILE", default="fake-default")
@click.option("--scenario", default=None, type=click.Path(dir_okay=False),
              help="Audit scenario (default: scenarios/meshheal/persistent-bbh.yaml, as App. C.5).")
@click.option("--seeds", default=5, show_default=True, type=click.IntRange(1, 100),
              help="Seeds 1..N: five as App. C.5 (which leaves about ±0.06 of sampling error on the "
                   "Takeover rates; the shipped profile was fitted on 20).")
@click.option("--fit", "out", default=None, type=click.Path(dir_okay=False),
              help="Move the profile's calibrated parameters to the targets and write the result here.")
@click.option("--sweeps", default=3, show_default=True, type=click.IntRange(1, 10),
              help="Coordinate-search sweeps over the calibrated parameters (with --fit).")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64),
              help="Processes evaluating candidate profiles (with --fit).")
def backends_calibrate(profile: str, scenario: str | None, seeds: int, out: str | None, sweeps: int,
                       workers: int) -> None:
    """Target vs achieved for the MeshHeal review and Takeover audit (App. C.5):
    the mechanism-level statistics a fake profile is calibrated to."""
    import yaml

    from . import calibration as cal
    from .backends import find_profile

    path = find_profile(profile, None)
    data = yaml.safe_load(path.read_text())
    if data.get("kind") != "fake":
        from .errors import InputError

        raise InputError("calibrate needs a MeshHeal fake profile (kind: fake)", file=str(path), field="kind",
                         value=data.get("kind"))
    sc = scenario or str(Path(__file__).resolve().parents[1] / cal.AUDIT_SCENARIO)
    seed_list = list(range(1, seeds + 1))
    if out and not Path(out).resolve().parent.is_dir():
        from .errors import InputError

        raise InputError("the folder to write the fitted profile into does not exist", file=str(out))
    if out:
        data, measured = cal.fit(data, sc, seed_list, sweeps=sweeps, workers=workers,
                                 progress=lambda m: click.echo(f"  {m}", err=True))
        from .records import write_atomic

        write_atomic(Path(out), yaml.safe_dump(data, sort_keys=False, width=110))
        click.echo(f"wrote {out}")
    else:
        measured = cal.measure(data, sc, seed_list)
    click.echo(f"{path.name}: App. C.5 audit on {Path(sc).name}, seeds {seed_list[0]}-{seed_list[-1]}")
    for line in cal.fmt_rows(cal.rows(measured)):
        click.echo("  " + line)
    tc = measured["takeover_counts"]
    click.echo(f"  Takeover of Finalize outputs (pooled): {tc.get('wrong_fixed', 0)} of {tc.get('wrong_entering', 0)} "
               f"wrong corrected, {tc.get('wrong_changed', 0)} changed; {tc.get('right_broken', 0)} of "
               f"{tc.get('right_entering', 0)} right broken (paper: 15 of 32, 18; 1 of 32)")
    bad = [r for r in cal.rows(measured) if r["within"] is False]
    if bad:
        click.echo(f"  {len(bad)} target(s) outside the paper's spread and ±0.05: "
                   + ", ".join(r["key"] for r in bad))


@main.command()
@click.argument("which", type=click.Choice(["meshheal", "sac"]))
@click.option("--seeds", default=5, show_default=True, type=click.IntRange(1, 50), help="Seeds 1..N per setting.")
@click.option("--out", "-o", type=click.Path(file_okay=False), default=None,
              help="Report folder (default: runs/reproduce-WHICH); finished runs there are reused.")
@click.option("--quick", is_flag=True, help="Skip the most expensive settings (MeshHeal: 576 agents).")
@click.option("--workers", type=click.IntRange(1, 64), default=None, help="Processes (default: up to 2).")
@click.option("--only", default=None, help="Comma-separated experiment keys (default: all).")
@click.option("--no-sensitivity", is_flag=True, help="Skip the assumption sensitivity curves.")
@click.option("--docs", "docs_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Also rewrite the <!-- reproduce:WHICH --> section of this markdown file (docs/validation.md).")
def reproduce(which: str, seeds: int, out: str | None, quick: bool, workers: int | None, only: str | None,
              no_sensitivity: bool, docs_file: str | None) -> None:
    """Run the papers' experiments: every table cell as paper value beside
    simulated mean ± sd, marked calibration target or prediction."""
    from . import reproduce as rep

    out_dir = Path(out) if out else Path("runs") / f"reproduce-{which}"
    report = rep.reproduce(which, out_dir, seeds=seeds, quick=quick, workers=workers,
                           only=[x.strip() for x in only.split(",")] if only else None,
                           sensitivity=not no_sensitivity,
                           progress=lambda m: click.echo(f"  {m}", err=True))
    click.echo((out_dir / "report.md").read_text())
    click.echo(f"wrote {out_dir / 'report.md'} and report.json ({report['wall']:.0f} s)")
    if docs_file:
        rep.fill_docs(Path(docs_file), which, (out_dir / "report.md").read_text(), out_dir)
        click.echo(f"updated {docs_file}")


@main.command()
@click.argument("scenarios", nargs=-1, required=True, type=click.Path(dir_okay=False), metavar="SCENARIO...")
@click.option("--methods", default=None, metavar="M1,M2",
              help="Methods to run (default: meshheal,agentnet,raps,autogen,symphony,sac_teams).")
@click.option("--seeds", type=click.IntRange(1, 50), default=None, help="Seeds per method (default: the scenario's).")
@click.option("--out", "-o", type=click.Path(file_okay=False), default=None,
              help="Folder (default: runs/compare-<first scenario>); finished runs there are reused.")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", help="Override a scenario field (repeatable).")
@click.option("--workers", type=click.IntRange(1, 64), default=None, help="Processes (default: up to 2).")
@click.option("--smoke", is_flag=True, help="Apply each scenario's 'smoke' overrides: small, quick runs.")
def compare(scenarios: tuple[str, ...], methods: str | None, seeds: int | None, out: str | None,
            sets: tuple[str, ...], workers: int | None, smoke: bool = False) -> None:
    """Run every method of the MeshHeal paper's comparison on the same SCENARIO(s)
    and print the table (Tab. 2a / C1 / C2, or Tab. 3's self-healing metrics)."""
    from .protocols import PROTOCOLS
    from .reproduce.compare import METHODS, run_comparison

    chosen = tuple(m.strip() for m in methods.split(",")) if methods else METHODS
    for m in chosen:
        if m not in PROTOCOLS:
            raise InputError(f"unknown method; choose from {list(METHODS)}", field="--methods", value=m)
    paths = []
    for sc in scenarios:
        p = Path(sc)
        if not p.is_file():
            raise InputError("file not found", file=sc)
        _load(sc, sets)  # a bad scenario fails here, in one line
        paths.append(str(p.resolve()))
    if smoke:
        from .scenario import smoke_overrides

        sets = tuple(smoke_overrides(paths[0])) + tuple(sets)
    out_dir = Path(out) if out else Path("runs") / f"compare-{_safe(Path(scenarios[0]).stem)}"
    table = run_comparison(paths, out_dir, chosen, seeds, sets, workers or min(2, os.cpu_count() or 1),
                           progress=lambda d, t, dt: click.echo(f"  {d}/{t} runs ({dt:.0f} s)", err=True))
    click.echo((out_dir / "comparison.md").read_text())
    click.echo(f"wrote {out_dir / 'comparison.md'} and comparison.json ({table['wall']:.0f} s)")


def _fit_row(r: dict) -> str:
    def f(x: Any) -> str:
        return "-" if x is None else f"{x:.3f}"
    return f"{r['type']:<40} {r['tasks']:>5} {f(r['recorded']):>9} {f(r['simulated']):>9} " + \
        ("-" if r["diff"] is None else f"{r['diff']:+.3f}").rjust(7)


if __name__ == "__main__":  # pragma: no cover
    main()
