"""The scenario file's JSON Schema (``meshsim schema``)."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from .document import Scenario
from .events import EVENT_TYPES
from .fields import DURATION_SCHEMA

__all__ = ["scenario_schema"]


def scenario_schema() -> dict[str, Any]:
    """The scenario file's JSON Schema (draft 2020-12), for editors and other tools.

    Built from the same models that validate a file, with the registries
    filled in: one schema per event type (by ``type``) and per protocol (its
    ``params``), the topology kinds, and durations and latencies that may be
    written as numbers or strings. Checks that need the graph (unknown
    agents, connectivity) are beyond a schema: ``meshsim validate`` runs them.
    """
    from .. import graphs
    from ..protocols import PROTOCOLS

    ref = "#/$defs/{model}"
    schema = Scenario.model_json_schema(ref_template=ref)
    defs = schema.setdefault("$defs", {})

    def add(name: str, model: type[BaseModel]) -> dict[str, Any]:
        sub = model.model_json_schema(ref_template=ref)
        defs.update(sub.pop("$defs", {}))
        defs[name] = sub
        return {"$ref": ref.format(model=name)}

    events = []
    for kind, cls in sorted(EVENT_TYPES.items()):
        r = add(f"event_{kind}", cls)
        defs[f"event_{kind}"]["properties"]["type"] = {"const": kind}
        events.append(r)
    schema["properties"]["events"] = {"type": "array", "items": {"oneOf": events}, "default": []}
    protocols = []
    for name, proto in sorted(PROTOCOLS.items()):
        params = add(f"params_{name}", proto.Params)
        _widen_parsed(defs, f"params_{name}", proto.Params)
        protocols.append({"type": "object", "additionalProperties": False, "required": ["name"],
                          "properties": {"name": {"const": name}, "params": params}})
    schema["properties"]["protocol"] = {"oneOf": protocols, "default": {"name": "routing"}}
    kinds = sorted(set(graphs.GENERATORS) | {"file"})
    defs["Topology"]["properties"]["kind"] = {"enum": kinds, "description": "generator (its own keys beside "
                                              "kind are checked when the graph is built)"}
    lat = defs["Latency"]
    defs["Latency"] = {"anyOf": [DURATION_SCHEMA, lat], "description": lat.get("description", "")}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "meshsim scenario"
    return schema


def _widen_parsed(defs: dict[str, Any], name: str, model: type[BaseModel]) -> None:
    """A field with a before-validator parses its input (a protocol's durations
    such as ``refresh: 5s``): its schema also accepts a string."""
    from pydantic.functional_validators import BeforeValidator

    props = defs[name].get("properties", {})
    for field, info in model.model_fields.items():
        key = info.alias or field
        if key in props and any(isinstance(m, BeforeValidator) for m in info.metadata):
            props[key] = {"anyOf": [props[key], {"type": "string"}], "description": "also a string the "
                          "protocol parses, e.g. a duration such as '5s'"}
