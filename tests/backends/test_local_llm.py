"""Real LLM calls against the local llama.cpp server (``backends/local-llm.sh``).

Marked ``integration``: skipped when no server answers on 127.0.0.1:18080,
unless ``MESHSIM_REQUIRE_LLM=1`` (set by ``.ci/run``, which installs and starts
the server), where a missing server fails the run instead of hiding it.

The main test records the two example scenarios against the server
(MeshHeal, 6 agents, 10 tasks; SAC, 7 agents, one query), stops the server,
replays both cassettes and compares the run folders byte for byte. It stops the
server only if ``backends/local-llm.sh`` started it, and restarts it after.
"""
from __future__ import annotations

import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

import meshsim
from meshsim.backends import make_backend
from meshsim.core.calls import CallKind, Request, TaskRef
from meshsim.io.records import read_records
from meshsim.io.runfolder import comparable_files

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "backends" / "local-llm.sh"
EXAMPLES = ROOT / "backends" / "examples"
REQUIRED = os.environ.get("MESHSIM_REQUIRE_LLM") == "1"

pytestmark = pytest.mark.integration


def _up() -> bool:
    try:
        urllib.request.urlopen("http://127.0.0.1:18080/health", timeout=2).read()
        return True
    except Exception:
        return False


@pytest.fixture(scope="module")
def server():
    if not _up():
        if REQUIRED:
            pytest.fail("MESHSIM_REQUIRE_LLM=1 but no LLM server answers on 127.0.0.1:18080 "
                        "(backends/local-llm.sh start)")
        pytest.skip("local LLM server not running (backends/local-llm.sh start)")


def _script(cmd: str) -> None:
    subprocess.run(["bash", str(SCRIPT), cmd], check=True, timeout=300)


def test_server_answers_with_usage_and_parsed_scores(server):
    task = TaskRef(index=1, id="bbh/object_counting/1", type="object_counting",
                   question="I have two apples and a pear. How many fruits do I have?", answer="3",
                   required=("arithmetic", "instruction_parsing"), dataset="bbh")

    def req(kind, model="strong", sample=0, **ctx):
        return Request(kind=kind, agent="A1", model=model, task=task, abilities=("arithmetic",), context=ctx,
                       sample=sample, seed=12345)

    b = make_backend({"kind": "openai", "profile": "local-llama", "max_tokens": 48}, 0, ROOT)
    try:
        r1 = b.complete_sync(req(CallKind.SAC_ANSWER))
        r2 = b.complete_sync(req(CallKind.SAC_ANSWER))
        s = b.complete_sync(req(CallKind.SAC_SCORE, response="Answer: 3"))
    finally:
        b.close()
    assert r1.error is None and r1.text.strip()
    assert r1.fields["usage_estimated"] is False and r1.prompt_tokens > 20 and r1.completion_tokens > 0
    # (no equality of r1 and r2: llama-server's prompt cache makes a repeated
    # request differ in the last bits, which can flip a near-tie at temperature 0;
    # exact reproduction is the cassette's job)
    assert r2.error is None and r2.text.strip()
    assert 0.0 <= s.fields["score"] <= 1.0
    assert b.describe()["errors"] == {}


def _load(example: str, cassette: Path, mode: str):
    return meshsim.load_scenario(EXAMPLES / example, [f"backend.cassette={cassette}", f"backend.mode={mode}"])


def _folder(d: Path) -> dict[str, bytes]:
    return comparable_files(d)  # provenance.json and the lock are not outputs


def test_record_meshheal_and_sac_then_replay_with_server_stopped(server, tmp_path):
    runs = {"meshheal": "meshheal-bbh-local.yaml", "sac": "sac-local.yaml"}
    rec = {}
    for name, example in runs.items():
        rec[name] = meshsim.run(_load(example, tmp_path / f"{name}.jsonl", "record"), out=tmp_path / f"{name}-rec")

    mh, sac = rec["meshheal"], rec["sac"]
    assert len(read_records(tmp_path / "meshheal-rec", "tasks.jsonl")) == 10
    assert mh.summary["network"]["agents"] == 6 and sac.summary["network"]["agents"] == 7
    for r in rec.values():
        t = r.transport
        # identical requests (same prompt, fixed seed) share one call: recorded + shared = served
        assert t["mode"] == "record" and t["recorded"] == t["inner"]["calls"] > 0
        assert t["recorded"] + t["hits"] == r.summary["backend"]["calls"]
        assert t["max_in_flight"] >= 3, t  # calls of one simulated instant were on the wire together
        print(f"\n{r.summary['scenario']}: {r.summary['backend']['calls']} calls served, {t['recorded']} on the "
              f"wire in {t['inner']['wall_seconds']:.0f} s, up to {t['max_in_flight']} in flight, "
              f"errors {r.summary['backend']['errors']}")

    # network off: stop the server this script started (CI's); a server run by
    # hand elsewhere is left alone (replay mode never calls it anyway)
    stopped = False
    if (Path(os.environ.get("MESHSIM_LLM_HOME", Path.home() / ".cache/meshsim/local-llm"))
            / "server-18080.pid").exists():
        _script("stop")
        stopped = True
    assert not REQUIRED or (stopped and not _up()), "the server should be down for the replay"
    try:
        for name, example in runs.items():
            rep = meshsim.run(_load(example, tmp_path / f"{name}.jsonl", "replay"), out=tmp_path / f"{name}-rep")
            a, b = _folder(tmp_path / f"{name}-rec"), _folder(tmp_path / f"{name}-rep")
            assert a.keys() == b.keys()
            for f in a:
                assert a[f] == b[f], f"{name}: {f} differs between the recorded run and its replay"
            assert rep.transport["hits"] == rec[name].summary["backend"]["calls"]
            assert rep.transport["misses"] == 0 and rep.transport["inner"]["calls"] == 0

        # fit a fake profile to the real recording (offline too): re-running the
        # recorded scenario with it gives the recorded accuracy per task type
        from click.testing import CliRunner

        from meshsim.cli import main

        res = CliRunner().invoke(main, ["backends", "fit", str(tmp_path / "meshheal-rec"), "-o",
                                        str(tmp_path / "fitted.yaml"), "--draws", "40", "--fail-above", "0.05"])
        assert res.exit_code == 0, res.output
        assert "recorded simulated" in res.output
        out = res.output.splitlines()
        head = next(i for i, line in enumerate(out) if "recorded simulated" in line)
        print("\nbackends fit, per task type:\n" + "\n".join(out[head:]))
    finally:
        if stopped:
            _script("start")
