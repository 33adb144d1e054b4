"""One typed commit planned (pipeline/lake/typed_writer.plan_typed): several schemas in one read are merged
into the table's columns in turn, one evolution step per change; a schema that cannot evolve the table and
a subject without a version turn records into dead letters with the reason. Sans IO: schemas come from a
dictionary through the ``SchemaLookup`` interface."""

from __future__ import annotations

import json
import struct
from typing import Any

import pyarrow as pa

from pipeline.lake.layouts import DEAD_LETTER, typed_columns
from pipeline.lake.typed_writer import plan_typed
from registry.errors import SchemaNotFound, SubjectNotFound
from registry.formats.avro import FORMAT as AVRO
from registry.formats.base import ParsedSchema
from storage.lake_config import read_mode
from tests.unit.registry.test_columns import avro_payload
from tests.unit.test_lake_layouts import raw


def item(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": "Item", "fields": list(fields)}


V1 = item({"name": "id", "type": "string"}, {"name": "qty", "type": "int"})
V2 = item({"name": "id", "type": "string"}, {"name": "qty", "type": "long"})
V3 = item({"name": "id", "type": "string"}, {"name": "note", "type": ["null", "string"]})
CLASH = item({"name": "id", "type": "long"})
SCHEMAS = {1: V1, 2: V2, 3: V3, 4: CLASH}


class Lookup:
    def parsed(self, schema_id: int) -> ParsedSchema:
        if schema_id not in SCHEMAS:
            raise SchemaNotFound(f"Schema {schema_id} not found")
        return AVRO.parse(json.dumps(SCHEMAS[schema_id]), [])

    def latest_id(self, subject: str) -> int:
        if subject != "items-value":
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        return 1


def framed(schema_id: int, value: dict[str, Any]) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + avro_payload(SCHEMAS[schema_id], value)


PREFIX = read_mode("value_schema_id_prefix")


def test_several_schemas_in_one_commit_evolve_the_table_in_turn() -> None:
    table = typed_columns(pa.schema([pa.field("id", pa.string()), pa.field("qty", pa.int32())]))
    batch = raw(
        [
            framed(1, {"id": "a", "qty": 1}),
            framed(2, {"id": "b", "qty": 2**40}),
            None,
            framed(3, {"id": "c", "note": "n"}),
            framed(4, {"id": 7}),
            framed(1, {"id": "d", "qty": 2}),
        ]
    )
    plan = plan_typed(table, batch, Lookup(), PREFIX, "items")
    steps = [(None if e is None else e.names, r.column("id").to_pylist()) for e, r in plan.steps]
    # V1 fits as it is; V2 widens qty; V3 adds note (qty stays: rows of V3 read null there).
    assert steps == [
        (None, ["a", "d"]),
        (["id", "qty", "strata"], ["b"]),
        (["id", "qty", "strata", "note"], ["c"]),
    ]
    assert plan.steps[1][0] is not None
    assert plan.steps[1][0].field("qty").type == pa.int64()
    assert plan.columns.field("note").nullable
    assert (plan.rows, plan.tombstones) == (4, 1)
    assert plan.dead_letters.schema == DEAD_LETTER
    (letter,) = plan.dead_letters.to_pylist()
    assert letter["offset"] == 104
    assert (
        letter["error"]
        == "schema id 4 cannot evolve the table: id: values of type int64 where the table has string"
    )


def test_latest_mode_without_a_subject_sends_every_value_to_the_dead_letters() -> None:
    table = typed_columns(pa.schema([]))
    payload = avro_payload(V1, {"id": "a", "qty": 1})
    found = plan_typed(table, raw([payload, None]), Lookup(), read_mode("value_schema_latest"), "items")
    assert [r.column("id").to_pylist() for _, r in found.steps] == [["a"]]
    missing = read_mode("value_schema_latest:subject=nothing")
    plan = plan_typed(table, raw([payload, None, payload]), Lookup(), missing, "items")
    assert (plan.steps, plan.tombstones) == ([], 1)
    assert [r["offset"] for r in plan.dead_letters.to_pylist()] == [100, 102]
    assert plan.dead_letters.column("error")[0].as_py() == (
        "the subject 'nothing' has no schema to decode the value with: Subject 'nothing' not found."
    )
