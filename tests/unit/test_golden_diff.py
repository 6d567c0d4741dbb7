"""The readable diff of golden files (tests/golden_diff.py) that the determinism test prints."""
from __future__ import annotations

import json

import yaml

from tests import golden_diff
from tests.golden_diff import check, diff, report


def test_a_changed_value_is_one_line_named_by_its_dotted_path():
    want = {"detection": {"A3": {"delay": 12, "closure": True}}, "accuracy": 0.7}
    got = {"detection": {"A3": {"delay": 14, "closure": True}}, "accuracy": 0.7}
    assert diff(want, got) == ["detection.A3.delay: 12 -> 14"]
    assert diff(want, want) == []


def test_added_removed_and_list_items_are_named():
    want = {"a": 1, "phases": [{"tasks": 3}, {"tasks": 4}], "gone": "x"}
    got = {"a": 1, "phases": [{"tasks": 5}], "new": [1, 2]}
    assert diff(want, got) == ["phases[0].tasks: 3 -> 5", "- phases[1]: {\"tasks\": 4}", '- gone: "x"',
                               "+ new: [1, 2]"]


def test_a_changed_type_is_a_change_even_where_python_calls_the_values_equal():
    assert diff({"n": 1}, {"n": 1.0}) == ["n: 1 -> 1.0"]
    assert diff({"ok": True}, {"ok": 1}) == ["ok: true -> 1"]
    assert diff(None, {"x": 1}) == ['(top): null -> {"x": 1}']


def test_check_rewrites_on_update_then_reads_the_golden_files_back(tmp_path):
    run, gold = tmp_path / "run", tmp_path / "gold"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"detection": {"A3": {"delay": 12}}}))
    (run / "scenario.resolved.yaml").write_text(yaml.safe_dump({"seed": 2, "tasks": {"count": 70}}))
    missing = check(gold, run)
    assert len(missing) == len(golden_diff.FILES) and all("--update-golden" in m for m in missing)
    assert check(gold, run, update=True) == []
    assert check(gold, run) == []
    (run / "summary.json").write_text(json.dumps({"detection": {"A3": {"delay": 14}}}))
    (run / "scenario.resolved.yaml").write_text(yaml.safe_dump({"seed": 2, "tasks": {"count": 84}}))
    assert check(gold, run) == ["summary.json: detection.A3.delay: 12 -> 14",
                                "scenario.resolved.yaml: tasks.count: 70 -> 84"]


def test_a_long_diff_is_cut_and_says_how_many_more():
    lines = [f"k{i}: 0 -> 1" for i in range(golden_diff.MAX_LINES + 7)]
    text = report(lines)
    assert text.count("\n") == golden_diff.MAX_LINES and text.endswith("... and 7 more")
    assert report(lines[:2]) == "  k0: 0 -> 1\n  k1: 0 -> 1"
