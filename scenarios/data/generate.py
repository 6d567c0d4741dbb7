#!/usr/bin/env python3
"""Rewrite scenarios/data/bbh-sample.jsonl: our own generated BBH-style items.

    python scenarios/data/generate.py [--per-type 12] [--seed 2609] [-o FILE]

Every answer is computed by the generator (meshsim/workload/datasets/synth.py), and the
script checks that each item's own answer passes its grader before writing.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from meshsim.workload.datasets import grade, write_jsonl
from meshsim.workload.datasets.graders import LETTERS
from meshsim.workload.datasets.synth import generate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-type", type=int, default=12)
    ap.add_argument("--seed", type=int, default=2609)
    ap.add_argument("-o", "--out", default=str(Path(__file__).with_name("bbh-sample.jsonl")))
    args = ap.parse_args()
    items = generate(args.per_type, args.seed)
    for it in items:
        reply = f"Answer: {it.answer}"
        if not grade(it, reply):
            print(f"generator bug: {it.id} does not grade its own answer", file=sys.stderr)
            return 1
        if it.choices and it.answer not in LETTERS[:len(it.choices)]:
            print(f"generator bug: {it.id} answer outside its choices", file=sys.stderr)
            return 1
    write_jsonl(args.out, items)
    print(f"{len(items)} items -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
