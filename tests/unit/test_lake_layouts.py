"""A raw batch as typed tables and dead-letter rows (pipeline/lake/layouts.py): rows grouped by schema, each
with its record's metadata, every other value in the dead-letter layout with its reason."""

from __future__ import annotations

import json
import struct
from datetime import UTC, datetime

import pyarrow as pa

from pipeline.lake.layouts import DEAD_LETTER, RAW, typed_batches, typed_columns
from registry.columns.typed import TypedRows
from registry.errors import SchemaNotFound
from registry.formats.avro import FORMAT as AVRO
from registry.formats.base import ParsedSchema
from tests.unit.registry.test_columns import ORDER, ORDER_AVRO, avro_payload

SCHEMA = AVRO.parse(json.dumps(ORDER_AVRO), [])


def lookup(schema_id: int) -> ParsedSchema:
    if schema_id != 5:
        raise SchemaNotFound(f"Schema {schema_id} not found")
    return SCHEMA


def raw(values: list[bytes | None]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "key": b"k%d" % i,
                "value": v,
                "topic": "orders",
                "partition": 1,
                "offset": 100 + i,
                "timestamp": datetime(2026, 11, 28, tzinfo=UTC),
                "timestampType": 0,
                "headers": [{"key": "h", "value": b"%d" % i}],
            }
            for i, v in enumerate(values)
        ],
        RAW,
    )


def test_a_raw_batch_becomes_typed_rows_and_dead_letters() -> None:
    good = b"\x00" + struct.pack(">I", 5) + avro_payload(ORDER_AVRO, ORDER)
    batch = raw([good, b"garbage", None, good, b"\x00" + struct.pack(">I", 5) + b"\x01"])
    result = typed_batches(batch, TypedRows(lookup))
    assert result.tombstones == 1
    [typed] = result.batches
    assert typed.schema_id == 5
    assert typed.rows.schema == typed_columns(
        typed.rows.schema.remove(typed.rows.schema.get_field_index("strata"))
    )
    rows = typed.rows.to_pylist()
    assert [r["id"] for r in rows] == [7, 7]
    assert [r["strata"]["offset"] for r in rows] == [100, 103]
    assert rows[1]["strata"] == {
        "partition": 1,
        "offset": 103,
        "timestamp": datetime(2026, 11, 28, tzinfo=UTC),
        "timestamp_type": 0,
        "key": b"k3",
        "headers": [{"key": "h", "value": b"3"}],
        "schema_id": 5,
    }
    assert result.dead_letters.schema == DEAD_LETTER
    letters = result.dead_letters.to_pylist()
    assert [(r["offset"], r["value"]) for r in letters] == [
        (101, b"garbage"),
        (104, batch["value"][4].as_py()),
    ]
    assert "no schema id" in letters[0]["error"]
    assert letters[1]["error"].startswith("schema id 5: ")
