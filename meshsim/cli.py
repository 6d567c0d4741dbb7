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

from .core.errors import InputError, MeshsimError
from .scenario.fields import CONFIRM_RUNS, SEEDS_HELP, check_plan_runs
from .core.redact import scrub

#: seeds are 0 .. 2**63-1 (meshsim.scenario.fields.MAX_SEED), on the command line too
SEED = click.IntRange(0, 2 ** 63 - 1)
#: the seed grammar's help for commands whose counts start at seed 1 (reproduce, backends calibrate)
_SEEDS_FROM_1 = SEEDS_HELP.replace("the scenario's seed", "seed 1")


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
    from .scenario.model import load_scenario

    return load_scenario(path, list(sets), smoke=smoke)


def _notes(sc: Any, links: Any = None, result: Any = None) -> None:
    """A valid scenario whose run can do nothing says so (issue 19: no silent
    degenerate run): the notes of a finished run's summaries, else the scenario's."""
    from .scenario.degenerate import degenerate_notes

    if result is not None:
        notes: list = []
        for r in getattr(result, "runs", None) or [result]:
            notes += [n for n in (r.summary or {}).get("notes", []) if n not in notes]
    else:
        notes = degenerate_notes(sc, links)
    for note in notes:
        click.echo(f"note: {sc.source}: {note}", err=True)


def _executor_options(f: Any) -> Any:
    """--workers, --executor and --scheduler of a command that runs on the sweep engine."""
    f = click.option("--scheduler", default=None, metavar="ADDRESS",
                     help="With --executor dask: 'local' or tcp://host:8786.")(f)
    f = click.option("--executor", type=click.Choice(["local", "dask"]), default="local", show_default=True)(f)
    return click.option("--workers", type=click.IntRange(1, 4096), default=None,
                        help="Processes (local) or LocalCluster workers (dask); default: the CPUs available.")(f)


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
    from .simulate.runner import run as run_api
    from .core.bundled import scenario_arg

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
        from .simulate.console import ProgressLines

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
        from .plots.report import write_report

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


def _seeds_text(text: str) -> str:
    """``--seeds`` as a ``seeds=`` override value (checked here, so the error names the option)."""
    from .scenario.fields import parse_seeds

    try:
        v = parse_seeds(text)
    except ValueError as exc:
        raise InputError(str(exc), field="--seeds", value=text) from None
    return json.dumps(v)


def _seeds_capped(text: str, first: int, most: int, keep_count: bool = False) -> Any:
    """``--seeds`` of a command with a fixed number of settings: at most ``most`` seeds; a count from ``first``
    (kept as a count with ``keep_count``: the callee numbers it)."""
    from .scenario.fields import parse_seeds, seed_list

    try:
        v = parse_seeds(text)
        n = v if isinstance(v, int) else len(v)
        if n > most:
            raise ValueError(f"at most {most} seeds (got {n})")
        return v if keep_count and isinstance(v, int) else seed_list(v, first)
    except ValueError as exc:
        raise InputError(str(exc), field="--seeds", value=text) from None


def _need_plotting() -> None:
    from .plots.canvas import require_matplotlib

    require_matplotlib()


def _safe(name: str) -> str:
    """One path component made of ``name`` (as ``Scenario.folder_name``): no
    separators, no leading dot, so ``runs/<it>`` stays inside ``runs/``."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "-" for c in name)
    return safe.lstrip(".")[:128] or "run"


def _print_result(result: Any, out_dir: Path, sc: Any = None) -> None:
    """Each seed's results in words (meshsim.simulate.console: what a number counts, what the paper says)."""
    from .simulate.console import false_isolation_reference, seed_lines
    from .simulate.runner import MultiRunResult

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
    from .simulate.console import next_steps

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
    from .simulate.console import seed_lines

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
    from .simulate.runner import validate as check
    from .core.bundled import scenario_arg

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
    from .scenario.model import build_graph

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
@click.option("--kind", type=click.Choice(["timeline", "heatmap", "phases", "detector", "sac", "topology", "gray",
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
@click.option("--rerun", is_flag=True, help="A run folder kept without records (a sweep's runs/<point>/): run the "
              "seed again and write its record tables into it first (docs/plots.md).")
def plot(run_dirs: tuple[str, ...], kind: str | None, agents: str | None, seed: int | None, x: str | None,
         y: str | None, metric: str | None, by: str | None, out: str | None, where: tuple[str, ...] = (),
         facet: str | None = None, color: str | None = None, rerun: bool = False) -> None:
    """Draw a figure of RUN_DIR (several RUN_DIRs for --kind sac) or of a sweep
    folder (--kind tradeoff, heatmap, sensitivity, parallel); see docs/plots.md and docs/sweeps.md."""
    from . import plots
    from .sweep import is_sweep_folder

    _need_plotting()
    if out is not None:
        plots.check_figure_path(out)
    if is_sweep_folder(run_dirs[0]) and kind != "gray":  # --kind gray: one line per point (docs/sac.md)
        from .plots.sweeps import render_sweep

        if rerun:
            raise InputError("--rerun takes a run folder: one of the sweep's runs/<point>/", file=run_dirs[0])
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

    if rerun and kind not in ("phases", "sac", "gray", "topology"):  # those read summary.json only
        from .plots.rerun import rerun_missing

        rs = plots.open_run(run_dirs[0])
        rerun_missing(rs, [seed if seed is not None else rs.seeds[0]], echo=click.echo)
    path = plots.render(list(run_dirs), kind=kind, agents=plots.parse_agents(agents), seed=seed, out=out)
    click.echo(f"wrote {path}")
    if kind == "phases":
        from .plots.report import healing_table, phase_table, print_tables, write_tables

        tabs = [t for t in (phase_table(run_dirs[0]), healing_table(run_dirs[0])) if t is not None]
        print_tables(tabs)
        for p in write_tables(tabs, path.parent, md_name=f"{path.stem}.md", prefix=f"{path.stem}-"):
            click.echo(f"wrote {p}")


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
    from .sweep import plan_sweep, point_label, resume_args, run_sweep, short_names

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
        from .core.bundled import scenario_arg

        scenario = scenario_arg(scenario)  # a file, or a shipped example's name
    plan = plan_sweep(scenario, grid, zips, seeds, sets, output, smoke)
    check_plan_runs(len(plan.runs), yes, "--seeds", seeds)
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
    from .plots.sweeps import redraw_stale

    redraw_stale(out_dir, echo=click.echo)  # figures and report.html drawn before the sweep grew (docs/sweeps.md)
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

 
def _search(scenario, grid, zips, seeds, sets, out, workers, executor, scheduler, output, smoke, dry_run, quiet,
            ranges, minimize, maximize, constraints, trials, batch, max_seeds, refine_runs, search_seed,
            yes=False) -> int:
    """``meshsim sweep --search optuna`` (docs/sweeps.md#search)."""
    from .sweep.search import describe_search, plan_search, run_search

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
        from .sweep import short_names

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
        from .sweep import short_names

        names = short_names(list(rec["values"]))
        click.echo(f"recommended (front point {rec['rank']}, trial {rec['trial']}, {rec['seeds']} seeds): "
                   + " ".join(f"{names[p]}={v}" for p, v in rec["values"].items()))
        for m, iv in rec["objectives"].items():
            ci = f" [{iv['lo']:.4g}, {iv['hi']:.4g}]" if iv["lo"] is not None else ""
            click.echo(f"  {m}: {iv['mean']:.4g}{ci}")
        click.echo(f"  {rec['set']}")
    click.echo("wrote " + ", ".join(str(p) for p in res.written))
    from .plots.sweeps import redraw_stale

    redraw_stale(out_dir, echo=click.echo)  # figures drawn before the search went on
    return 100 + min(res.failed_runs, 99) if res.failed_runs else 0


def plan_point_values(plan: Any, key: str) -> dict:
    return next((p.values for p in plan.points if p.key == key), {})


def _seed_text(seeds: list[int]) -> str:
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return "seed" + ("s " if len(seeds) != 1 else " ") + ",".join(map(str, seeds))


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
    from .uncertainty import check_metrics, plan_uncertainty, run_uncertainty

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
    from .uncertainty.core import noise_warning

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
    from .verdict import console_lines, folder_status, plan_verdict, run_verdict, seeds_text

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


@main.command()
def schema() -> None:
    """Print the scenario file's JSON Schema (for editors and other tools)."""
    from .scenario.model import scenario_schema

    click.echo(json.dumps(scenario_schema(), indent=2, sort_keys=True))


@main.group(invoke_without_command=True)
@click.pass_context
def scenarios(ctx: click.Context) -> None:
    """The example scenarios shipped with meshsim: name, what it runs, the paper section it
    reproduces. 'meshsim run NAME' runs one; 'meshsim scenarios copy NAME [DIR]' copies one to edit."""
    if ctx.invoked_subcommand is not None:
        return
    from .core.bundled import examples

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
    from .core.bundled import copy_example

    click.echo(f"wrote {copy_example(name, dest)}")


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
@click.option("--rerun", is_flag=True, help="A run folder kept without records (a sweep's runs/<point>/): run its "
              "seeds again and write their record tables into it first (docs/plots.md).")
def report(run_dir: str, seed: int | None, where: tuple[str, ...] = (), facet: str | None = None,
           reference: tuple[str, ...] = (), out: str | None = None, rerun: bool = False) -> None:
    """Write RUN_DIR/report.html: scenario, tables and figures in one self-contained file
    (a sweep folder: trade-off, parallel coordinates, every parameter's effect, heat maps and the
    per-point table with intervals)."""
    from .plots.report import write_report
    from .sweep import is_sweep_folder

    _need_plotting()
    from .uncertainty import is_uncertainty_folder

    if is_uncertainty_folder(run_dir):  # also a sweep folder: its own report
        from .uncertainty.report import write_report as write_uncertainty_report

        click.echo(f"wrote {write_uncertainty_report(run_dir)[-1]}")
        return
    if is_sweep_folder(run_dir):
        from .plots.sweeps import write_sweep_report

        if rerun:
            raise InputError("--rerun takes a run folder: one of the sweep's runs/<point>/", file=run_dir)
        path = write_sweep_report(run_dir, out, where=where, facet=facet, reference=list(reference) or None)
        click.echo(f"wrote {path}")
        return
    if where or facet or reference or out:
        raise InputError("--where, --facet, --reference and --out take a sweep folder (meshsim sweep)",
                         file=run_dir)
    if rerun:
        from .plots import open_run
        from .plots.rerun import rerun_missing

        rerun_missing(open_run(run_dir), echo=click.echo)
    click.echo(f"wrote {write_report(run_dir, seed=seed)}")


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
    from .analysis.evidence import explain_folder, format_explanation, seed_folders

    texts = []
    for f in seed_folders(run_dir, seed):
        ex = explain_folder(f, agent=agent)
        texts.append(json.dumps(ex.to_dict(), sort_keys=True) if as_json else format_explanation(ex, rows=not brief))
    click.echo(("\n" if as_json else "\n\n").join(texts))


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
    from .io.records import has_records

    if check and Path(source).is_dir() and has_records(Path(source), "tasks.jsonl"):
        from .paper import fitcheck

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
    calibrated to a mechanism-level target, or assumption), and each
    assumption's plausible range (ranges:). Exit 2 when a number has no source
    or, in a fake profile, an assumption no range."""
    from .backends import find_profile
    from .backends.provenance import assumption_factors, explain_rows, load_profile_data, range_for

    path = find_profile(profile, None)
    data = load_profile_data(path)
    rows = explain_rows(data)
    factors = assumption_factors(data, str(path))  # a malformed ranges: entry stops here (exit 2)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["kind"]] = counts.get(r["kind"], 0) + 1
        got = range_for(r["path"], data) if r["kind"] == "assumption" else None
        r["range"] = _range_text(got[1]) if got else ("none" if r["kind"] == "assumption" else "")
    click.echo(f"{path}: {data.get('name', '')} ({data.get('kind', '?')}), {len(rows)} numbers, "
               f"{len(factors)} assumption factors")
    w = max([len(r["path"]) for r in rows] + [4])
    click.echo(f"  {'path':<{w}} {'value':>10}  {'kind':<10} {'range':<14} source")
    for r in rows:
        if only is None or r["kind"] == only:
            v = r["value"]
            vs = f"{v:g}" if isinstance(v, float) else str(v)
            click.echo(f"  {r['path']:<{w}} {vs:>10}  {r['kind']:<10} {r['range']:<14} {r['source']}")
    if only in (None, "assumption") and factors:
        click.echo(f"  ranges ({len(factors)} factors of meshsim uncertainty; numbers under one entry move together):")
        for f in factors:
            click.echo(f"    {f.name} {_range_text(data['ranges'][f.name])} ({len(f.leaves)} number"
                       f"{'s' if len(f.leaves) != 1 else ''}): {f.why}")
    click.echo("  " + ", ".join(f"{k}: {n}" for k, n in sorted(counts.items())))
    bad = counts.get("missing", 0) + counts.get("?", 0)
    if bad:
        first = next(r["path"] for r in rows if r["kind"] in ("missing", "?"))
        click.echo(f"error: {path}: {bad} number(s) without a source of a known kind, first: {first}", err=True)
        sys.exit(2)
    # a fake's numbers model LLM behaviour: each assumption is a factor of meshsim uncertainty
    # (an endpoint profile's assumptions are settings: timeouts, retries, budgets)
    unranged = [r["path"] for r in rows if r["kind"] == "assumption" and r["range"] == "none"]
    if unranged and data.get("kind") in ("fake", "fake_consensus"):
        click.echo(f"error: {path}: ranges: {len(unranged)} assumption(s) without a plausible range, first: "
                   f"{unranged[0]}", err=True)
        sys.exit(2)


def _range_text(spec: dict) -> str:
    """[low, high] of a ranges: entry, or x[lo, hi] for a scale."""
    if "scale" in spec:
        return "x[{:g}, {:g}]".format(*spec["scale"])
    return f"[{spec['low']:g}, {spec['high']:g}]"


@backends.command("calibrate")
@click.argument("profile", metavar="PROFILE", default="fake-default")
@click.option("--scenario", default=None, type=click.Path(dir_okay=False),
              help="Audit scenario (default: scenarios/meshheal/persistent-bbh.yaml, as App. C.5).")
@click.option("--seeds", default="count:5", show_default=True, metavar="SEEDS",
              help=f"Audit seeds, at most 100: {_SEEDS_FROM_1}; count:5 (seeds 1-5) as App. C.5, which leaves "
                   "about ±0.06 of sampling error on the Takeover rates (the shipped profile was fitted on 20).")
@click.option("--fit", "out", default=None, type=click.Path(dir_okay=False),
              help="Move the profile's calibrated parameters to the targets and write the result here.")
@click.option("--sweeps", default=3, show_default=True, type=click.IntRange(1, 10),
              help="Coordinate-search sweeps over the calibrated parameters (with --fit).")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64),
              help="Processes evaluating candidate profiles (with --fit).")
def backends_calibrate(profile: str, scenario: str | None, seeds: str, out: str | None, sweeps: int,
                       workers: int) -> None:
    """Target vs achieved for the MeshHeal review and Takeover audit (App. C.5):
    the mechanism-level statistics a fake profile is calibrated to."""
    import yaml

    from .paper import calibration as cal
    from .backends import find_profile
    from .core.bundled import bundled

    path = find_profile(profile, None)
    data = yaml.safe_load(path.read_text())
    if data.get("kind") != "fake":
        from .core.errors import InputError

        raise InputError("calibrate needs a MeshHeal fake profile (kind: fake)", file=str(path), field="kind",
                         value=data.get("kind"))
    sc = scenario or str(bundled(cal.AUDIT_SCENARIO))  # from any folder (issue 32)
    seed_list = _seeds_capped(seeds, 1, 100)
    click.echo(f"audit: {len(seed_list)} runs per profile evaluated ({_seed_text(seed_list)})", err=True)
    if out and not Path(out).resolve().parent.is_dir():
        from .core.errors import InputError

        raise InputError("the folder to write the fitted profile into does not exist", file=str(out))
    if out:
        data, measured = cal.fit(data, sc, seed_list, sweeps=sweeps, workers=workers,
                                 progress=lambda m: click.echo(f"  {m}", err=True))
        from .io.records import write_atomic

        write_atomic(Path(out), yaml.safe_dump(data, sort_keys=False, width=110))
        click.echo(f"wrote {out}")
    else:
        measured = cal.measure(data, sc, seed_list)
    click.echo(f"{path.name}: App. C.5 audit on {Path(sc).name}, {_seed_text(seed_list)}")
    for line in cal.fmt_rows(cal.rows(measured)):
        click.echo("  " + line)
    tc = measured["takeover_counts"]
    click.echo(f"  Takeover of Finalize outputs (pooled): {tc.get('wrong_fixed', 0)} of {tc.get('wrong_entering', 0)} "
               f"wrong corrected, {tc.get('wrong_changed', 0)} changed; {tc.get('right_broken', 0)} of "
               f"{tc.get('right_entering', 0)} right broken (paper: 15 of 32, 18; 1 of 32)")
    click.echo("")
    for line in cal.fmt_counts(cal.counts(measured), len(seed_list)):
        click.echo("  " + line)
    bad = [r for r in cal.rows(measured) if r["within"] is False]
    if bad:
        click.echo(f"  {len(bad)} target(s) outside the paper's spread and ±0.05: "
                   + ", ".join(r["key"] for r in bad))


@main.command()
@click.argument("which", type=click.Choice(["meshheal", "sac"]))
@click.option("--seeds", default="count:5", show_default=True, metavar="SEEDS",
              help=f"Seeds per setting, at most 50: {_SEEDS_FROM_1}.")
@click.option("--out", "-o", type=click.Path(file_okay=False), default=None,
              help="Report folder (default: runs/reproduce-WHICH); finished runs there are reused.")
@click.option("--quick", is_flag=True, help="Skip the most expensive settings (MeshHeal: 576 agents).")
@click.option("--workers", type=click.IntRange(1, 64), default=None, help="Processes (default: up to 2).")
@click.option("--only", default=None, help="Comma-separated experiment keys (default: all).")
@click.option("--no-sensitivity", is_flag=True, help="Skip the assumption sensitivity curves.")
@click.option("--docs", "docs_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Also rewrite the <!-- reproduce:WHICH --> section of this markdown file (docs/validation.md).")
@click.option("--bands", "bands_dir", type=click.Path(file_okay=False), multiple=True,
              help="A meshsim uncertainty folder whose Latin-hypercube samples give each prediction row its "
                   "assumption band (repeatable: the studies' top factors move together; default: "
                   "runs/uncertainty-<reference scenario> of each reference scenario that has one, else the "
                   "copy shipped with meshsim, each experiment over its own reference studies).")
@click.option("--band-samples", type=click.IntRange(1, 10000), default=None,
              help="Band samples per row (default 20; 8 with --quick).")
@click.option("--no-bands", is_flag=True, help="No assumption bands.")
def reproduce(which: str, seeds: str, out: str | None, quick: bool, workers: int | None, only: str | None,
              no_sensitivity: bool, docs_file: str | None, bands_dir: tuple[str, ...] = (),
              band_samples: int | None = None, no_bands: bool = False) -> None:
    """Run the papers' experiments: every table cell as paper value beside
    simulated mean ± sd, marked calibration target or prediction."""
    from .paper import reproduce as rep

    out_dir = Path(out) if out else Path("runs") / f"reproduce-{which}"
    report = rep.reproduce(which, out_dir, seeds=_seeds_capped(seeds, 1, 50, keep_count=True), quick=quick,
                           workers=workers,
                           only=[x.strip() for x in only.split(",")] if only else None,
                           sensitivity=not no_sensitivity,
                           progress=lambda m: click.echo(f"  {m}", err=True),
                           bands=[Path(d) for d in bands_dir] or None, band_samples=band_samples,
                           use_bands=not no_bands)
    click.echo((out_dir / "report.md").read_text())
    click.echo(f"wrote {out_dir / 'report.md'} and report.json ({report['wall']:.0f} s)")
    if docs_file:
        rep.fill_docs(Path(docs_file), which, (out_dir / "report.md").read_text(), out_dir)
        click.echo(f"updated {docs_file}")


@main.command()
@click.argument("scenarios", nargs=-1, required=True, type=click.Path(dir_okay=False), metavar="SCENARIO...")
@click.option("--methods", default=None, metavar="M1,M2",
              help="Methods to run (default: meshheal,agentnet,raps,autogen,symphony,sac_teams).")
@click.option("--seeds", default=None, metavar="SEEDS",
              help=f"Seeds per method, at most 50: {SEEDS_HELP} (default: the scenario's).")
@click.option("--out", "-o", type=click.Path(file_okay=False), default=None,
              help="Folder (default: runs/compare-<first scenario>); finished runs there are reused.")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", help="Override a scenario field (repeatable).")
@click.option("--workers", type=click.IntRange(1, 64), default=None, help="Processes (default: up to 2).")
@click.option("--smoke", is_flag=True, help="Apply each scenario's 'smoke' overrides: small, quick runs.")
def compare(scenarios: tuple[str, ...], methods: str | None, seeds: str | None, out: str | None,
            sets: tuple[str, ...], workers: int | None, smoke: bool = False) -> None:
    """Run every method of the MeshHeal paper's comparison on the same SCENARIO(s)
    and print the table (Tab. 2a / C1 / C2, or Tab. 3's self-healing metrics)."""
    from .protocols import PROTOCOLS
    from .paper.reproduce.compare import METHODS, run_comparison

    chosen = tuple(m.strip() for m in methods.split(",")) if methods else METHODS
    for m in chosen:
        if m not in PROTOCOLS:
            raise InputError(f"unknown method; choose from {list(METHODS)}", field="--methods", value=m)
    paths = []
    chosen_seeds = None if seeds is None else _seeds_capped(seeds, 0, 50, keep_count=True)
    n_runs = 0
    for sc in scenarios:
        p = Path(sc)
        if not p.is_file():
            raise InputError("file not found", file=sc)
        loaded = _load(sc, sets)  # a bad scenario fails here, in one line
        paths.append(str(p.resolve()))
        n_runs += len(chosen) * len(loaded.seed_list() if chosen_seeds is None else
                                    _seeds_capped(seeds, loaded.seed, 50))
    click.echo(f"compare: {len(chosen)} methods x {len(scenarios)} scenario{'s' if len(scenarios) != 1 else ''}: "
               f"{n_runs} runs", err=True)  # the plan's size before any work (issue 29)
    if smoke:
        from .scenario.model import smoke_overrides

        sets = tuple(smoke_overrides(paths[0])) + tuple(sets)
    out_dir = Path(out) if out else Path("runs") / f"compare-{_safe(Path(scenarios[0]).stem)}"
    table = run_comparison(paths, out_dir, chosen, chosen_seeds, sets, workers or min(2, os.cpu_count() or 1),
                           progress=lambda d, t, dt: click.echo(f"  {d}/{t} runs ({dt:.0f} s)", err=True))
    click.echo((out_dir / "comparison.md").read_text())
    click.echo(f"wrote {out_dir / 'comparison.md'} and comparison.json ({table['wall']:.0f} s)")


def _fit_row(r: dict) -> str:
    def f(x: Any) -> str:
        return "-" if x is None else f"{x:.3f}"
    return f"{r['type']:<40} {r['tasks']:>5} {f(r['recorded']):>9} {f(r['simulated']):>9} " + \
        ("-" if r["diff"] is None else f"{r['diff']:+.3f}").rjust(7)


class _OcKinds(click.Choice):
    """The registered detectors with closed-form OC, read when first needed (not at CLI start)."""

    def __init__(self) -> None:
        super().__init__(())

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        from .analysis.detector import oc_kinds

        return tuple(oc_kinds())

    @choices.setter
    def choices(self, value: Any) -> None:
        pass


@main.command()
@click.argument("source", metavar="PROFILE|RUN_DIR|SCENARIO")
@click.option("--detector", "kind", type=_OcKinds(), default=None,
              help="Rule (default: the scenario's, else relative).")
@click.option("--alpha", type=float, default=None, help="Watch threshold on z (Tab. B11: 1.2).")
@click.option("--beta", type=float, default=None, help="Isolation threshold on z (2.0).")
@click.option("--window", type=click.IntRange(1, 32), default=None, help="Shortfalls in x̄ (8).")
@click.option("--floor", type=click.FloatRange(min=0.0, min_open=True), default=None, help="Floor of m - p25 (0.10).")
@click.option("--min-obs", type=click.IntRange(1, 1000), default=None, help="Matched observations first (3).")
@click.option("--consecutive", type=click.IntRange(1, 20), default=None, help="Crossings of beta to isolate (2).")
@click.option("--scope", type=click.Choice(["agent", "key"]), default=None,
              help="x̄ and the crossing count per agent or per (T, s) detector (default: the scenario's, agent).")
@click.option("--abs-watch", type=float, default=None, help="Absolute rule: watch below this mean score.")
@click.option("--abs-isolate", type=float, default=None, help="Absolute rule: isolate below this mean score.")
@click.option("--cusum-k", type=float, default=None, help="CUSUM allowance.")
@click.option("--cusum-h", type=float, default=None, help="CUSUM watch threshold (isolation at 2h).")
@click.option("--cusum-target", type=float, default=None, help="CUSUM expected healthy score.")
@click.option("--outputs", type=click.IntRange(1, 10 ** 6), default=None,
              help="Detector updates per healthy agent per stream (default: from the stream).")
@click.option("--dataset", default=None, help="Task types of the Monte Carlo (PROFILE: bbh; SCENARIO: its own).")
@click.option("--samples", type=click.IntRange(200, 10 ** 6), default=20000, show_default=True,
              help="Reviewed outputs per producer in the score Monte Carlo (cached).")
@click.option("--no-cache", is_flag=True, help="Recompute the score distributions (no cache read or write).")
@click.option("--vary", default=None, metavar="PARAM=LOW:HIGH[:N]",
              help="A curve over one parameter (alpha, beta, window, floor, min_obs, consecutive, abs_*, cusum_*).")
@click.option("--simulate", "sim_reps", type=click.IntRange(100, 10 ** 6), default=None, metavar="REPS",
              help="Also run the real detector on REPS i.i.d. producers (controlled simulation, 99 % intervals).")
@click.option("--pool", type=click.IntRange(1, 10 ** 4), default=None,
              help="A finite neighbourhood: POOL peers' x̄ in the normal range and 2 peers' per-key mean as the "
                   "reference, in the closed form's finite-pool estimate (default 5) and in --simulate (default: "
                   "the large-pool limit).")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", help="Override a scenario field first.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--plot", "plot_kind", type=click.Choice(["oc", "runlength"]), default=None,
              help="Figure: oc (false isolation vs delay along --vary, default beta) or runlength.")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None, help="Figure file (default: detector-<kind>.png).")
def detector(source: str, kind: str | None, alpha, beta, window, floor, min_obs, consecutive, scope, abs_watch,
             abs_isolate, cusum_k, cusum_h, cusum_target, outputs, dataset, samples, no_cache, vary, sim_reps, pool,
             sets, as_json, plot_kind, out) -> None:
    """Closed-form operating characteristics of MeshHeal's detector (docs/detector.md): false isolation
    per healthy agent per stream, in-control run length, detection-delay distribution, watched rate and
    reintegration probes, from a fake PROFILE's behaviour model, a RUN_DIR's scores or a SCENARIO."""
    import time

    from .analysis import detector as oc_math
    from .analysis import report

    t0 = time.perf_counter()
    if plot_kind:
        _need_plotting()
        if out is not None:
            from .plots import check_figure_path

            check_figure_path(out)
    name_vals = report.parse_vary(vary) if vary else None
    src = report.resolve(source, dataset, samples, not no_cache, tuple(sets))
    p = report.detector_params(src.params, alpha=alpha, beta=beta, window=window, floor=floor, min_obs=min_obs,
                               consecutive=consecutive, abs_watch=abs_watch, abs_isolate=abs_isolate,
                               cusum_k=cusum_k, cusum_h=cusum_h, cusum_target=cusum_target, scope=scope)
    kind = kind or getattr(src.params, "detector", oc_math.RELATIVE)
    if kind not in oc_math.oc_kinds():
        kind = oc_math.RELATIVE
    if plot_kind == "oc" and name_vals is None:
        if kind != "relative":
            raise InputError("--plot oc needs --vary for the absolute and CUSUM rules", field="--vary")
        name_vals = ("beta", [round(1.2 + 0.2 * i, 2) for i in range(10)])
    st = src.stream
    kw = dict(detector=kind, outputs=outputs or int(round(st.outputs)), keys=max(1, int(round(st.keys))),
              healthy_before=int(round(st.healthy_before)), degraded_outputs=int(round(st.degraded_outputs)),
              probe_every=st.probe_every)
    oc = oc_math.operating_characteristics(src.model, p, pool=pool or 5, **kw)
    curve = None
    if name_vals is not None:
        curve = oc_math.curve(src.model, p, name_vals[0], name_vals[1], **kw)
    secs = time.perf_counter() - t0
    sim = None
    if sim_reps:
        from .analysis.simulate import simulate

        sim = simulate(src.model, p, kind, outputs=kw["outputs"] // kw["keys"] if p.count_scope == "key" else
                       kw["outputs"], healthy_before=3 * p.window, reps=sim_reps, delay_reps=max(100, sim_reps // 3),
                       pool_size=pool)
    if as_json:
        doc = {"source": src.kind, "scores": src.model.describe(), "stream": st.describe(), "oc": oc.summary(),
               "range": report.range_summary(src, oc), "seconds": round(secs, 3)}
        if curve is not None:
            doc["curve"] = {"param": name_vals[0], "values": name_vals[1], "points": [c.summary() for c in curve]}
        if src.simulated is not None:
            doc["simulated"] = src.simulated.describe()
        if sim is not None:
            doc["controlled_simulation"] = report.sim_summary(sim, pool)
        click.echo(json.dumps(doc, indent=2, default=float))
    else:
        for line in report.lines(src, oc, secs):
            click.echo(line)
        if sim is not None:
            click.echo(report.sim_line(sim, pool))
        if curve is not None:
            click.echo("")
            for line in report.curve_lines(name_vals[0], name_vals[1], curve):
                click.echo(line)
    if plot_kind:
        from .plots import save_figure
        from .plots.oc import oc_figure, runlength_figure

        target = Path(out or f"detector-{plot_kind}.png")
        if plot_kind == "oc":
            sim = None
            if src.simulated is not None:
                s = src.simulated.describe()
                sim = {"p": s["false_isolation_probability"], "delay": s["delay_outputs_mean"],
                       "label": f"simulated ({s['seeds']} seeds)"}
            default = getattr(p, oc_math.PARAMS[name_vals[0]])
            fig = oc_figure(curve, name_vals[0], name_vals[1], default=default, simulated=sim)
        else:
            fig = runlength_figure(oc)
        click.echo(f"wrote {save_figure(fig, target)}", err=as_json)


if __name__ == "__main__":  # pragma: no cover
    main()
