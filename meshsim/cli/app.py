"""The ``meshsim`` click group: exit codes, one-line errors, and the options and helpers its
command modules share.

Exit codes: 0 ok, 2 bad input or an unusable environment (one line on stderr
naming file, field and value: a bad scenario, an unreachable endpoint, a
locked, full or read-only run folder), 130 interrupted (Ctrl-C; a rerun
resumes), 1 internal error (a bug).
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from ..core.errors import InputError, MeshsimError
from ..scenario.fields import SEEDS_HELP
from ..core.redact import scrub

#: seeds are 0 .. 2**63-1 (meshsim.scenario.fields.MAX_SEED), on the command line too
SEED = click.IntRange(0, 2 ** 63 - 1)
#: the seed grammar's help for commands whose counts start at seed 1 (reproduce, backends calibrate)
_SEEDS_FROM_1 = SEEDS_HELP.replace("the scenario's seed", "seed 1")


def _fail(exc: BaseException, code: int) -> None:
    click.echo(scrub(f"error: {exc}"), err=True)
    sys.exit(code)


#: seconds an interrupted or terminated command may spend in the interpreter's exit (joining threads,
#: running exit handlers) before it ends anyway
EXIT_GRACE = 10.0


def _exit_within(code: int, seconds: float = EXIT_GRACE) -> None:
    """Ctrl-C or SIGTERM must end the process: should a library's exit
    handler wait for ever (a thread blocked on a pipe, say), a guard ends the
    process with ``code`` ``seconds`` after the interpreter began to exit,
    saying so. The guard waits for that moment (joining the main thread
    returns when the interpreter's exit starts), so a caller that catches the
    ``SystemExit`` and goes on (a test's CliRunner) is never cut short."""
    import threading
    import time

    def guard() -> None:
        threading.main_thread().join()
        time.sleep(seconds)
        try:
            sys.stderr.write(f"exit took over {seconds:g} s; ending now\n")
            sys.stderr.flush()
        finally:
            os._exit(code)

    threading.Thread(target=guard, name="meshsim-exit-guard", daemon=True).start()


def _interrupted(message: str = "interrupted") -> None:
    click.echo(message, err=True)
    _exit_within(130)
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
        except SystemExit as exc:
            if exc.code == 143:  # SIGTERM during a sweep (sweep.lifeline.sigterm_exits)
                _exit_within(143)
            raise
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
    from ..scenario.model import load_scenario

    return load_scenario(path, list(sets), smoke=smoke)


def _notes(sc: Any, links: Any = None, result: Any = None) -> None:
    """A valid scenario whose run can do nothing says so (issue 19: no silent
    degenerate run): the notes of a finished run's summaries, else the scenario's."""
    from ..scenario.degenerate import degenerate_notes

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


def _seeds_text(text: str) -> str:
    """``--seeds`` as a ``seeds=`` override value (checked here, so the error names the option)."""
    from ..scenario.fields import parse_seeds

    try:
        v = parse_seeds(text)
    except ValueError as exc:
        raise InputError(str(exc), field="--seeds", value=text) from None
    return json.dumps(v)


def _seeds_capped(text: str, first: int, most: int, keep_count: bool = False) -> Any:
    """``--seeds`` of a command with a fixed number of settings: at most ``most`` seeds; a count from ``first``
    (kept as a count with ``keep_count``: the callee numbers it)."""
    from ..scenario.fields import parse_seeds, seed_list

    try:
        v = parse_seeds(text)
        n = v if isinstance(v, int) else len(v)
        if n > most:
            raise ValueError(f"at most {most} seeds (got {n})")
        return v if keep_count and isinstance(v, int) else seed_list(v, first)
    except ValueError as exc:
        raise InputError(str(exc), field="--seeds", value=text) from None


def _need_plotting() -> None:
    from ..plots.canvas import require_matplotlib

    require_matplotlib()


def _safe(name: str) -> str:
    """One path component made of ``name`` (as ``Scenario.folder_name``): no
    separators, no leading dot, so ``runs/<it>`` stays inside ``runs/``."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "-" for c in name)
    return safe.lstrip(".")[:128] or "run"


def _seed_text(seeds: list[int]) -> str:
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return "seed" + ("s " if len(seeds) != 1 else " ") + ",".join(map(str, seeds))
