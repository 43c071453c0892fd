"""The registry: every kind of work the product measures, listed once, and every table that
depends on the kinds derived from that list.

`KINDS` is the one place a kind is registered (adding a kind is adding its package,
engine/scenarios/<kind>/, and a line here: docs/ARCHITECTURE.md, "Adding a kind of work").
From it come `SCENARIOS` (kind -> its Scenario: what everything shared asks through
`scenario_of(spec)` instead of branching on the kind), `MESSAGES` (the protocol's messages
and each kind's own: the map `decode` reads every line with) and `KIND_TABLES` (the tables
of kind-specific measurements store/db.py creates). Nothing is registered by importing a
module: each table is computed here, once, from `KINDS`.

Framework-free: the worker body is named by module path and imported only in a worker.
"""

from __future__ import annotations

from engine.core import protocol
from engine.core.protocol import CORE_MESSAGES, Message, message_types
from engine.scenarios.base import Scenario
from engine.scenarios.dataload.hooks import DATA_LOADING
from engine.scenarios.generation.hooks import GENERATION
from engine.scenarios.genserve.hooks import GENSERVING
from engine.scenarios.inference.hooks import INFERENCE
from engine.scenarios.serving.hooks import SERVING
from engine.scenarios.tables import KindTable
from engine.scenarios.training.hooks import TRAINING

__all__ = ["KINDS", "SCENARIOS", "MESSAGES", "KIND_TABLES", "scenario_of", "decode",
           "Scenario", "INFERENCE", "TRAINING", "DATA_LOADING", "SERVING", "GENERATION",
           "GENSERVING"]

# Every kind of work, in the order the product lists them.
KINDS: tuple[Scenario, ...] = (INFERENCE, TRAINING, DATA_LOADING, SERVING, GENERATION, GENSERVING)

SCENARIOS: dict[str, Scenario] = {s.kind: s for s in KINDS}
assert len(SCENARIOS) == len(KINDS), "two kinds share a name"
# Wire name -> message type: the protocol's, then each kind's (a name taken twice raises)
MESSAGES: dict[str, type[Message]] = message_types(CORE_MESSAGES, *(s.messages for s in KINDS))
# Every kind's own measurement tables, which store/db.py creates (engine.scenarios.tables)
KIND_TABLES: tuple[KindTable, ...] = tuple(t for s in KINDS for t in s.tables)
assert len({t.name for t in KIND_TABLES}) == len(KIND_TABLES), "two kinds share a table"


def scenario_of(spec) -> Scenario:
    """The scenario a spec (or a record, or anything with a `kind`) belongs to."""
    return SCENARIOS[spec.kind]


def decode(line: str | bytes) -> Message:
    """The message a protocol line holds, of any registered kind (engine.core.protocol's
    decode with MESSAGES); ProtocolError, saying why, for anything else."""
    return protocol.decode(line, messages=MESSAGES)
