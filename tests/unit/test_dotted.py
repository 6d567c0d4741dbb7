"""core.dotted: the one dotted-path module (issue 31, item 5)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsim.core.dotted import MISSING, PathError, delete_path, get_path, leaves, nest, set_path, split


def test_split_drops_blanks_and_empty_parts():
    assert split(" a..b.0 ") == ["a", "b", "0"]
    assert split(["a", "b.c"]) == ["a", "b.c"]  # parts are taken as they are
    assert split("") == []


def test_get_reads_mappings_and_list_items():
    data = {"a": {"b": [10, {"c": 3}]}, "n": None}
    assert get_path(data, "a.b.1.c") == 3
    assert get_path(data, "a.b.0") == 10
    assert get_path(data, "n") is None  # a null is a value, not a missing one
    assert get_path(data, "a.b.2", "dflt") == "dflt"
    assert get_path(data, "a.b.x", MISSING) is MISSING
    with pytest.raises(KeyError, match="a.z"):
        get_path(data, "a.z")


def test_set_creates_mappings_and_replaces_items():
    data: dict = {"a": [1, 2], "b": None}
    set_path(data, "x.y.z", 1)
    set_path(data, "a.1", 5)
    set_path(data, "b.c", 2)  # a null on the way becomes a mapping
    assert data == {"a": [1, 5], "b": {"c": 2}, "x": {"y": {"z": 1}}}


@pytest.mark.parametrize("path, reason, at, value", [
    ("a.2", "list index out of range", "a.2", "2"),
    ("a.k", "list index out of range", "a.k", "k"),
    ("s.t", "cannot set a field inside a scalar", "s", 7),
    ("a.0.t", "cannot set a field inside a scalar", "a.0", 1),
])
def test_set_refuses_what_it_cannot_address(path, reason, at, value):
    with pytest.raises(PathError) as e:
        set_path({"a": [1, 2], "s": 7}, path, 0)
    assert (e.value.reason, e.value.at, e.value.value) == (reason, at, value)


def test_set_without_create_only_replaces_existing_leaves():
    data = {"a": {"b": 1}, "l": [0]}
    set_path(data, "a.b", 2, create=False)
    set_path(data, "l.0", 3, create=False)
    assert data == {"a": {"b": 2}, "l": [3]}
    for bad in ("a.c", "z.b", "a.b.c"):
        with pytest.raises(PathError):
            set_path(data, bad, 0, create=False)
    assert data == {"a": {"b": 2}, "l": [3]}


def test_delete_pops_keys_and_fills_list_items():
    data = {"a": {"b": 1, "c": 2}, "l": [1, 2, 3]}
    delete_path(data, "a.b")
    delete_path(data, "l.1", fill="<gone>")
    delete_path(data, "nowhere.x")  # nothing there: nothing to do
    assert data == {"a": {"c": 2}, "l": [1, "<gone>", 3]}


def test_leaves_walks_in_order_with_lists_and_skips():
    data = {"b": {"x": 1, "name": {"y": 2}}, "a": [3, {"z": 4}], "e": {}}
    assert list(leaves(data)) == [("b.x", 1), ("b.name.y", 2), ("a", [3, {"z": 4}])]
    assert list(leaves(data, lists=True, skip={"name"})) == [("b.x", 1), ("a.0", 3), ("a.1.z", 4)]
    assert nest("a.b", 1) == {"a": {"b": 1}}


_key = st.text(alphabet="abcxyz019-_", min_size=1, max_size=4)
_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3))
_tree = st.recursive(_leaf, lambda kids: st.dictionaries(_key, kids, min_size=1, max_size=4), max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_key, _tree, max_size=5))
def test_leaves_get_and_set_agree(data):
    """Every leaf is found again at its path, and setting every leaf into an empty mapping
    builds the same data again."""
    rebuilt: dict = {}
    for path, value in leaves(data):
        assert get_path(data, path) == value
        set_path(rebuilt, path, value)
    assert rebuilt == data
    for path, _ in leaves(data):
        delete_path(rebuilt, path)
        assert get_path(rebuilt, path, MISSING) is MISSING
