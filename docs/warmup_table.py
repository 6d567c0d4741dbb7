"""The warm-up table of docs/validation.md (issue 34): MeshHeal with and without
its App. C.2 warm-up, from run folders already written (it runs nothing).

    python docs/warmup_table.py LABEL OFF_DIR ON_DIR [LABEL OFF_DIR ON_DIR ...]

Each DIR is a multi-seed run folder (``meshsim run --seeds ... -o DIR``, with
``output.trace: states``). Per seed: false isolations (healthy agents isolated
at some point, and isolation events of healthy agents), those before the first
degradation / by task 100, detection delay in stream tasks and in the agent's
own outputs (mean over the seed's detected episodes), missed episodes,
accuracy per phase. Printed: mean ± sd over seeds [95 % t-interval of the mean].
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import yaml
from scipy import stats

from meshsim.io.records import read_records


def per_seed(run: Path, warm: int) -> dict[str, float]:
    s = json.loads((run / "summary.json").read_text())
    d = s["detection"]
    starts = [a["degraded_at"] for a in s["agents"].values() if a.get("degraded_at") is not None]
    b0 = min(starts, default=math.inf)
    degraded = {n for n, a in s["agents"].items() if a.get("degraded_at") is not None}
    states = read_records(run, "states.jsonl")
    if not (run / "states.jsonl.gz").exists() and not (run / "states.jsonl").exists():
        raise SystemExit(f"{run}: no states.jsonl (run with --set output.trace=states)")
    iso = [r for r in states if r["new"] == "isolated"]
    out = {"false isolations (agents)": d["false_isolations"],
           "never-degraded agents isolated at some point": d["never_degraded_isolated"],
           "false isolation events": d["false_isolation_events"]}
    if b0 < math.inf:  # before any agent degrades every isolation is a false one
        out["false isolation events before the first degradation"] = sum(1 for r in iso if r["task"] < b0)
    out[f"false isolation events in tasks 1..{warm} (the warm-up)"] = sum(1 for r in iso if r["task"] <= warm)
    if d["ever_healthy_agents"] <= 6:
        # the six-agent figure; at scale 100 tasks are one or two outputs per agent
        out["never-degraded agents isolated by task 100"] = len({r["agent"] for r in iso
                                                                 if r["task"] <= 100 and r["agent"] not in degraded})
    if d["episodes"]:
        out["missed episodes"] = d["missed"]
        out["detection delay (tasks)"] = d["delay_mean"]
        out["detection delay (own outputs)"] = d["delay_outputs_mean"]
        if d.get("reintegration_delay_mean") is not None:
            out["reintegration delay (tasks)"] = d["reintegration_delay_mean"]
    names = [p["name"] for p in (yaml.safe_load((run / "scenario.resolved.yaml").read_text()).get("phases") or [])]
    for ph, acc in sorted((s["accuracy"].get("by_phase") or {}).items(),
                          key=lambda kv: names.index(kv[0]) if kv[0] in names else len(names)):
        out[f"accuracy {ph}"] = acc
    out["accuracy overall"] = s["accuracy"]["overall"]
    return out


def warmup_of(run: Path) -> int:
    sc = yaml.safe_load((run / "scenario.resolved.yaml").read_text())
    return int((sc["protocol"].get("params") or {}).get("warmup", 0))


def band(xs: list[float], digits: int = 1) -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "—"
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return f"{m:.{digits}f} (1 seed)"
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    h = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    fmt = (lambda v: f"{v:.{digits}f}")
    return f"{fmt(m)} ± {fmt(sd)} [{fmt(m - h)}, {fmt(m + h)}]"


def seeds(folder: Path) -> list[Path]:
    runs = sorted(p for p in folder.glob("seed-*") if (p / "summary.json").exists())
    return runs or ([folder] if (folder / "summary.json").exists() else [])


def main(argv: list[str]) -> int:
    if not argv or len(argv) % 3:
        print(__doc__.strip().splitlines()[3].strip(), file=sys.stderr)
        return 2
    print("| setting | measure | warm-up off | warm-up on |")
    print("| --- | --- | --- | --- |")
    for i in range(0, len(argv), 3):
        label, off, on = argv[i], Path(argv[i + 1]), Path(argv[i + 2])
        warm = warmup_of(seeds(on)[0])
        a = [per_seed(r, warm) for r in seeds(off)]
        b = [per_seed(r, warm) for r in seeds(on)]
        keys = list(dict.fromkeys(k for row in a + b for k in row))
        for k in keys:
            dg = 3 if k.startswith("accuracy") else 1
            print(f"| {label} | {k} | {band([r.get(k) for r in a], dg)} | {band([r.get(k) for r in b], dg)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
