"""Secrets stay out of sweep, search and uncertainty folders (issue 30, item 4).

A scenario whose endpoint URL carries user-info and a query token, with extra
headers in the file and on the command line (``--set``), is swept, searched
and studied; then every file of each folder (gzip inflated) is read and no
8-character piece of any secret may appear. Secrets leave *by field*
(meshsim.core.redact.structural), never by searching text; a folder still resumes.
"""
from __future__ import annotations

import gzip
import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from tests.helpers import send_json, serve
from meshsim.cli import main
from meshsim.core.redact import MASK, redact_set
from meshsim.sweep.manifest import check_compatible, public, read_manifest, write_manifest

KEY_VAR = "MESHSIM_SWEEP_SECRET_KEY"
SECRETS = {  # no runs of consecutive characters: a Parquet file holds the bytes 0..255 in order
    "user": "alice-u7Qx3Wm9Kd",
    "password": "pw-7f3Kq9ZrT2mXv8Lw",
    "query": "qtok-Rj4nW8eYp1sQ6dHz",
    "file_header": "fhdr-Xo2Lk7Vb5Nc9Gt",
    "set_header": "shdr-P4mZ8wQ1rJ6yTe",
    "set_url_password": "setpw-H3dK9sL2vB7nFq",
    "env": "sk-env-M5tR8cW2yG6jPa0Ux",
}


def pieces(secret: str, text: str, n: int = 8) -> list[str]:
    return sorted({secret[i:i + n] for i in range(len(secret) - n + 1) if secret[i:i + n] in text})


def every_text(folder: Path) -> str:
    out = []
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            raw = p.read_bytes()
            out.append(f"== {p}\n" + (gzip.decompress(raw) if p.name.endswith(".gz") else raw)
                       .decode("utf-8", "replace"))
    return "\n".join(out)


def assert_clean(text: str) -> None:
    found = {name: pieces(s, text) for name, s in SECRETS.items()}
    assert not any(found.values()), {k: v for k, v in found.items() if v}


def _answer(body: dict) -> str:
    sys_msg = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
    if "You review" in sys_msg:
        return json.dumps({"normal_working_score": 0.9, "confidence": 0.8, "specific_failure_found": False,
                           "failure_type": "none", "failure_evidence": "", "one_sentence_reason": "fine"})
    if "You route tasks" in sys_msg:
        user = body["messages"][-1]["content"]
        ttype = user.split("Task type: ")[1].split("\n")[0]
        pair = user.split(f"- {ttype}: ")[1].split("\n")[0]
        return json.dumps({"abilities": pair.split(", ")})
    return "COMPETENCE_MATCH:partial\nworked it out\nAnswer: Yes"


class Stub(BaseHTTPRequestHandler):
    """A well-behaved OpenAI-compatible endpoint on 127.0.0.1 (it never echoes)."""

    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802
        send_json(self, 200, {"data": [{"id": "s"}, {"id": "w"}]})

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        send_json(self, 200, {"choices": [{"message": {"role": "assistant", "content": _answer(body)},
                                           "finish_reason": "stop"}],
                              "usage": {"prompt_tokens": 40, "completion_tokens": 10}})

    def log_message(self, *a):
        pass


@pytest.fixture
def stub():
    with serve(Stub, daemon_threads=True) as srv:
        yield srv


def scenario(tmp_path: Path, port: int) -> Path:
    """6 agents, 7 tasks, MeshHeal through a recording cassette to the stub; secrets in the scenario file's
    endpoint URL (user-info, query) and in an extra header."""
    prof = {"kind": "openai", "name": "ep", "base_url": f"http://127.0.0.1:{port}/v1", "api_key_env": KEY_VAR,
            "models": {"strong": {"id": "s"}, "weak": {"id": "w"}}, "retries": {"max": 0}, "concurrency": 4}
    (tmp_path / "ep.yaml").write_text(yaml.safe_dump(prof))
    url = f"http://{SECRETS['user']}:{SECRETS['password']}@127.0.0.1:{port}/v1?sig={SECRETS['query']}"
    sc = {"name": "secret-sweep", "seed": 1, "network": {"topology": {"kind": "complete", "n": 6}},
          "agents": {"profile": "bbh"}, "protocol": {"name": "meshheal"},
          "backend": {"kind": "replay", "mode": "record", "cassette": "cas.jsonl",
                      "backend": {"kind": "openai", "profile": "ep.yaml", "base_url": url,
                                  "headers": {"X-Team-Secret": SECRETS["file_header"]}}},
          "tasks": {"dataset": "bbh", "count": 7, "block": 7}, "output": {"trace": "none"}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sc))
    return path


def set_args(port: int) -> list[str]:
    return ["--set", f"backend.backend.headers.X-Team-Token={SECRETS['set_header']}",
            "--set", "backend.backend.models={strong: {id: s}, weak: {id: w, base_url: 'http://bob:"
                     f"{SECRETS['set_url_password']}@127.0.0.1:{port}/v1'}}}}"]


# ------------------------------------------------------------------------------------------ units


def test_set_items_lose_secret_values_by_field_and_keep_the_rest():
    assert redact_set("backend.backend.headers.X-Team-Token=abc") == (f"backend.backend.headers.X-Team-Token={MASK}",
                                                                      True)
    assert redact_set("backend.backend.api_key=k") == (f"backend.backend.api_key={MASK}", True)
    text, removed = redact_set("backend.backend.base_url=http://u:pw-secret@h:8/v1?sig=tok")
    assert removed and text == f"backend.backend.base_url=http://h:8/v1?sig={MASK}"
    text, removed = redact_set("backend.backend={headers: {X-A: hdr-secret}}")
    assert removed and "hdr-secret" not in text and "X-A" in text
    for plain in ("network.links.loss=0.1", "seeds=3", "backend.backend.base_url=http://127.0.0.1:8/v1",
                  f"backend.backend.headers.X={MASK}"):
        assert redact_set(plain) == (plain, False)


_SECRET = st.text(st.sampled_from("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789-_"), min_size=8,
                  max_size=40)


@settings(max_examples=150, deadline=None)
@given(secret=_SECRET, where=st.sampled_from(["header", "key", "userinfo", "query", "mapping"]))
def test_a_set_item_never_keeps_a_piece_of_its_secret(secret, where):
    item = {"header": f"backend.backend.headers.X-Any={secret}",
            "key": f"backend.backend.api_key={secret}",
            "userinfo": f"backend.backend.base_url=http://me:{secret}@h:9/v1",
            "query": f"backend.backend.models.weak.base_url=http://h/v1?sig={secret}&x=1",
            "mapping": f"backend.backend={{headers: {{X-Any: '{secret}'}}, base_url: 'http://u:{secret}@h/'}}"}[where]
    text, removed = redact_set(item)
    assert removed and pieces(secret, text.split("=", 1)[1]) == [], text
    assert text.split("=", 1)[0] == item.split("=", 1)[0]  # the path stays: resuming names it


def test_the_written_manifest_is_redacted_and_still_matches_its_scenario(tmp_path):
    base = {"name": "x", "backend": {"kind": "replay", "backend": {
        "base_url": f"http://{SECRETS['user']}:{SECRETS['password']}@h/v1?sig={SECRETS['query']}",
        "headers": {"X-Team-Token": SECRETS["set_header"]}}}}
    m = {"format": "meshsim-sweep/1", "base": base, "axes": [], "output": "summary", "points": {}, "skipped": [],
         "runs": [], "command": {"path": "s.yaml", "set": [f"backend.backend.headers.X-Team-Token="
                                                           f"{SECRETS['set_header']}", "seeds=2"]}}
    write_manifest(tmp_path, m)
    text = (tmp_path / "manifest.json").read_text()
    assert_clean(text)
    back = read_manifest(tmp_path)
    assert back["command"]["withheld"] == ["backend.backend.headers.X-Team-Token"]
    assert back["command"]["set"][1] == "seeds=2"
    assert back["base"]["backend"]["backend"]["base_url"] == f"http://h/v1?sig={MASK}"
    check_compatible(back, m, tmp_path)  # the redacted manifest is not "a different scenario"
    assert public(public(m)) == public(m)  # writing twice changes nothing


# ------------------------------------------------------------------------------------ whole folders


@pytest.mark.slow  # (waits on deadlines or runs whole commands: the slow phase keeps it)
def test_a_sweep_and_its_resume_write_no_secret_anywhere(stub, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VAR, SECRETS["env"])
    port = stub.server_address[1]
    sc = scenario(tmp_path, port)
    out = tmp_path / "sweep"
    args = ["sweep", str(sc), "--grid", "protocol.params.tau_to=0.3,0.5", "--seeds", "1", "--workers", "1",
            "--output", "full", "--out", str(out), "-q", *set_args(port)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output + res.stderr
    assert_clean(every_text(out) + res.output + res.stderr)
    man = json.loads((out / "manifest.json").read_text())
    assert sorted(man["command"]["withheld"]) == ["backend.backend.headers.X-Team-Token",
                                                  "backend.backend.models"]
    # the same command again: every run is found finished (the redacted manifest is the same scenario)
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0 and "(2 resumed)" in res.output, res.output + res.stderr
    # --out alone: the withheld --set values must be given again (one line, exit 2)...
    res = CliRunner().invoke(main, ["sweep", "--out", str(out), "--workers", "1", "-q"])
    assert res.exit_code == 2 and "give --set backend.backend" in res.stderr, res.output + res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    # ...and with them it resumes, a rotated token included (secrets are not part of what was run)
    rotated = ["--set", "backend.backend.headers.X-Team-Token=rotated-token-value",
               "--set", "backend.backend.models={strong: {id: s}, weak: {id: w, base_url: 'http://bob:other-pass@"
                        f"127.0.0.1:{port}/v1'}}}}"]
    res = CliRunner().invoke(main, ["sweep", "--out", str(out), "--workers", "1", "-q", *rotated])
    assert res.exit_code == 0 and "(2 resumed)" in res.output, res.output + res.stderr
    assert_clean(every_text(out))
    assert "rotated-token-value"[:8] not in every_text(out)


@pytest.mark.slow  # a 2-trial search (~5 s)
def test_a_search_writes_no_secret_anywhere(stub, tmp_path, monkeypatch):
    pytest.importorskip("optuna")
    monkeypatch.setenv(KEY_VAR, SECRETS["env"])
    port = stub.server_address[1]
    sc = scenario(tmp_path, port)
    out = tmp_path / "search"
    args = ["sweep", str(sc), "--search", "optuna", "--range", "protocol.params.tau_to=0.3:0.5",
            "--maximize", "accuracy.overall", "--trials", "2", "--batch", "2", "--seeds", "1", "--max-seeds", "1",
            "--refine-runs", "0", "--workers", "1", "--out", str(out), "-q", *set_args(port)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output + res.stderr
    names = {p.name for p in out.iterdir()}
    assert {"manifest.json", "study.journal", "trials.csv", "recommended.json"} <= names
    assert_clean(every_text(out) + res.output + res.stderr)
    res = CliRunner().invoke(main, args)  # resumes: the redacted manifest is the same study
    assert res.exit_code == 0 and "(2 resumed)" in res.output, res.output + res.stderr


@pytest.mark.slow  # a 50-run study (~10 s)
def test_an_uncertainty_study_writes_no_secret_anywhere(tmp_path, monkeypatch):
    """A fake-backend study's scenario has no field that can hold a secret (its backend takes none), so
    the secrets are planted in the base scenario of the study's sweep plans, which the manifest is
    written from (the runs themselves are the validated samples)."""
    pytest.importorskip("SALib")
    from meshsim.uncertainty import core as ucore

    root = Path(__file__).resolve().parents[2]
    prof = yaml.safe_load((root / "backends" / "fake-default.yaml").read_text())
    prof["ranges"] = yaml.safe_load((root / "tests" / "data" / "uncertainty" / "fake-ranges.ranges.yaml")
                                    .read_text())["ranges"]
    (tmp_path / "fake-ranges.yaml").write_text(yaml.safe_dump(prof, sort_keys=False))
    (tmp_path / "small.yaml").write_text((root / "tests" / "data" / "uncertainty" / "small.yaml").read_text())
    make_plan = ucore._sweep_plan

    def planted(study, samples):
        plan = make_plan(study, samples)
        plan.base = dict(plan.base, notes={
            "url": f"http://{SECRETS['user']}:{SECRETS['password']}@h/v1?sig={SECRETS['query']}",
            "headers": {"X-Team-Token": SECRETS["set_header"]}, "api_key": SECRETS["env"]})
        return plan

    monkeypatch.setattr(ucore, "_sweep_plan", planted)
    from meshsim.sweep import folder as sfolder

    def inputs(plan, real=sfolder.plan_inputs):  # the planted `notes` is no scenario key: the input check skips it
        import copy as _copy

        bare = _copy.copy(plan)
        bare.base = {k: v for k, v in plan.base.items() if k != "notes"}
        return real(bare)

    monkeypatch.setattr(sfolder, "plan_inputs", inputs)
    out = tmp_path / "study"
    res = CliRunner().invoke(main, ["uncertainty", str(tmp_path / "small.yaml"), "--metric",
                                    "detection.false_isolations", "--budget", "50", "--seeds", "1-2", "--top", "2",
                                    "--workers", "1", "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output + res.stderr
    man = json.loads((out / "manifest.json").read_text())
    assert man["base"]["notes"]["headers"] == {"X-Team-Token": MASK}  # the planted secrets reached the writer
    assert_clean(every_text(out) + res.output + res.stderr)
