"""The run's protocol fields as the observer assembles them: the metrics of the
protocol's family (execution layer, MeshHeal, SAC / CP-WBFT) computed from its
records, then what the protocol itself adds (:meth:`Protocol.summary`), and the
tables the observer derives beside the protocol's own.

The protocols never import this package: the runner calls these at the run's end.
"""
from __future__ import annotations

from typing import Any

from ..protocols.base import Protocol
from ..protocols.consensus import ConsensusProtocol
from ..protocols.execution import ExecutionLayer
from ..protocols.meshheal import MeshHeal
from .consensus import consensus_query_row, consensus_summary
from .execution import execution_summary, meshheal_summary

__all__ = ["protocol_summary", "protocol_tables"]


def protocol_summary(proto: Protocol) -> dict[str, Any]:
    """summary.json's protocol fields: the observer's metrics, then the protocol's own."""
    proto.close_records()
    out: dict[str, Any]
    if isinstance(proto, MeshHeal):
        out = meshheal_summary(proto)
    elif isinstance(proto, ExecutionLayer):
        out = execution_summary(proto)
    elif isinstance(proto, ConsensusProtocol):
        out = consensus_summary(proto)
    else:
        out = {}
    out.update(proto.summary())
    return out


def protocol_tables(proto: Protocol) -> dict[str, list[dict[str, Any]]]:
    """Every table of the run folder with the rows not yet streamed: the observer's
    (``queries.jsonl`` of SAC / CP-WBFT) first, then the protocol's."""
    tables = proto.output_tables()
    if isinstance(proto, ConsensusProtocol):
        T = proto.params.rounds
        tables = {"queries.jsonl": [consensus_query_row(r, T) for r in proto.query_rows], **tables}
    return tables
