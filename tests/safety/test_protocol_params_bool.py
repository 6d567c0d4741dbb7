"""Issue 31 item 5, "one strict base": every protocol's parameter model derives
from :class:`meshsim.core.strict.Strict`, so a boolean where a number belongs
(``--set protocol.params.window=true``) is one line, exit 2, naming the field,
as it is everywhere else in a scenario (it used to be read as 1)."""
from __future__ import annotations

import typing
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from meshsim.cli import main
from meshsim.core.strict import Strict
from meshsim.protocols import PROTOCOLS

ROOT = Path(__file__).resolve().parents[2]


def _numeric(annotation: typing.Any) -> bool:
    if annotation is bool:
        return False
    if annotation in (int, float):
        return True
    args = typing.get_args(annotation)
    return bool(args) and bool is not annotation and any(_numeric(a) for a in args) and bool not in args


def _numeric_fields() -> list[tuple[str, str]]:
    out = []
    for name in sorted(PROTOCOLS):
        for field, info in PROTOCOLS[name].Params.model_fields.items():
            if _numeric(info.annotation):
                out.append((name, field))
    return out


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_every_protocol_params_model_is_strict(name):
    assert issubclass(PROTOCOLS[name].Params, Strict), PROTOCOLS[name].Params


def test_the_numeric_fields_are_found():
    found = _numeric_fields()
    protocols = {p for p, _ in found}
    assert {"meshheal", "routing", "sac", "cpwbft"} <= protocols, protocols
    assert ("meshheal", "window") in found and ("routing", "refresh") in found


@pytest.mark.parametrize("name, field", _numeric_fields())
@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_is_never_a_protocol_number(name, field, value):
    with pytest.raises(ValidationError, match=f"'{field}' must be a number, not a boolean"):
        PROTOCOLS[name].Params.model_validate({field: value})


@pytest.mark.parametrize("scenario, setting, field", [
    ("scenarios/meshheal/persistent-bbh.yaml", "protocol.params.window=true", "window"),
    ("scenarios/routing/sparse-failures.yaml", "protocol.params.infinity=yes", "infinity"),
    ("scenarios/adversarial/sac-gray-byzantine.yaml", "protocol.params.rounds=true", "rounds"),
    ("scenarios/adversarial/cpwbft-gray-byzantine.yaml", "protocol.params.parse_default=false", "parse_default"),
])
def test_validate_refuses_a_boolean_protocol_parameter_in_one_line(scenario, setting, field):
    res = CliRunner().invoke(main, ["validate", str(ROOT / scenario), "--smoke", "--set", setting],
                             catch_exceptions=False)
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1, (res.exit_code, res.stderr)
    assert lines[0].startswith("error:") and f"'{field}' must be a number, not a boolean" in lines[0], lines


def test_a_boolean_protocol_switch_still_takes_a_boolean():
    res = CliRunner().invoke(main, ["validate", str(ROOT / "scenarios/meshheal/persistent-bbh.yaml"), "--smoke",
                                    "--set", "protocol.params.committee=false"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
