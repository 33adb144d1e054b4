"""The lake's table layouts, and a batch of raw rows turned into the typed and dead-letter layouts.

- **raw**: exactly the columns ``read_topic`` gives with headers (``pipeline/decode.arrow_schema``): key,
  value, topic, partition, offset, timestamp, timestampType, headers. The raw table therefore equals
  ``read_topic`` over the offsets it holds.
- **typed**: the value schema's columns (``registry/columns``) and a ``strata`` struct with the record's
  metadata: partition, offset, timestamp, timestamp_type, key, headers and the schema id (Redpanda's layout,
  with its ``redpanda`` struct under Strata's name).
- **dead-letter**: the raw layout plus ``error``, the reason the record has no typed row.

``typed_batches`` converts a raw batch: one Arrow table per schema (and Protobuf message) the batch's values
were written with, in the table's columns, and the dead-letter rows. A value that decodes but that Arrow
refuses in its columns (it cannot happen with the shapes of ``registry/columns``; the check keeps a bug there
from stopping the writer) goes to the dead-letter table too, with Arrow's message. Tombstones have no value
to convert: an append table has no row for them (the state table applies them as deletes).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from pipeline.decode import HEADERS_TYPE, arrow_schema
from registry.columns import RESERVED_COLUMN
from registry.columns.typed import Converted, Fixed, TypedRows

RAW = arrow_schema(include_headers=True)
ERROR_COLUMN = "error"
DEAD_LETTER = RAW.append(pa.field(ERROR_COLUMN, pa.string(), nullable=False))
METADATA = pa.struct(
    [
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestamp_type", pa.int32()),
        pa.field("key", pa.binary()),
        pa.field("headers", HEADERS_TYPE),
        pa.field("schema_id", pa.int32(), nullable=False),
    ]
)


def typed_columns(value_columns: pa.Schema) -> pa.Schema:
    return value_columns.append(pa.field(RESERVED_COLUMN, METADATA, nullable=False))


@dataclass(frozen=True, slots=True)
class TypedBatch:
    schema_id: int
    message: str | None
    rows: pa.Table  # in typed_columns(the schema's value columns)
    positions: list[int]  # each row's position in the raw batch


@dataclass(frozen=True, slots=True)
class TypedResult:
    batches: list[TypedBatch]
    dead_letters: pa.Table  # in DEAD_LETTER
    tombstones: int


def typed_batches(raw: pa.Table, converter: TypedRows, fixed: Fixed | None = None) -> TypedResult:
    """``raw`` (in the raw layout) as typed tables and dead-letter rows."""
    converted: Converted = converter.convert(raw.column("value").to_pylist(), fixed)
    failed: list[tuple[int, str]] = [(r.position, r.reason) for r in converted.refusals]
    batches: list[TypedBatch] = []
    for group in converted.groups:
        columns = typed_columns(group.shape.arrow)
        metadata = _metadata(raw, group.positions, group.schema_id)
        try:
            values = pa.Table.from_pylist(group.rows, group.shape.arrow)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            failed.extend((p, f"schema id {group.schema_id}: {exc}") for p in group.positions)
            continue
        rows = values.append_column(pa.field(RESERVED_COLUMN, METADATA, nullable=False), metadata)
        batches.append(TypedBatch(group.schema_id, group.message, rows.cast(columns), group.positions))
    return TypedResult(batches, dead_letter_rows(raw, failed), len(converted.tombstones))


def dead_letter_rows(raw: pa.Table, failed: list[tuple[int, str]]) -> pa.Table:
    """The raw rows at the failed positions, each with its reason, in offset order."""
    failed = sorted(failed)
    rows = raw.select(RAW.names).take(pa.array([p for p, _ in failed], pa.int64()))
    return rows.append_column(
        pa.field(ERROR_COLUMN, pa.string(), nullable=False), pa.array([r for _, r in failed], pa.string())
    ).cast(DEAD_LETTER)


def _metadata(raw: pa.Table, positions: list[int], schema_id: int) -> pa.StructArray:
    picked = raw.take(pa.array(positions, pa.int64()))
    return pa.StructArray.from_arrays(
        [
            picked.column("partition").combine_chunks(),
            picked.column("offset").combine_chunks(),
            picked.column("timestamp").combine_chunks(),
            picked.column("timestampType").combine_chunks(),
            picked.column("key").combine_chunks(),
            picked.column("headers").combine_chunks(),
            pa.array([schema_id] * len(positions), pa.int32()),
        ],
        fields=list(METADATA),
    )
