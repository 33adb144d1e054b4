"""The raw table's layout: the Iceberg schema of Spark's Kafka source, and partition specs from the topic's
``strata.iceberg.partition.spec`` (``storage/lake_config.py``). The dead-letter table's is the raw one plus
``error`` (id 12); the typed table's is ``typed_writer.typed_schema``.

The columns are exactly those ``pipeline.read_topic`` returns with headers (``pipeline.decode``): key, value,
topic, partition, offset, timestamp (timestamptz, microseconds), timestampType and headers, so that the
table over an offset range equals ``read_topic`` over it. (partition, offset) is the identifier (every row
has one, no two rows share it), so those two columns are required; so are the others a record always has.
Key, value and a header's value may be null, as in Kafka.

Field ids are fixed here (1-11, the partition fields from 1000), not assigned by pyiceberg from an Arrow
schema: a table created by any version of the writer has the same ids.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from storage.lake_config import PartitionTerm

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema

_FIRST_PARTITION_FIELD_ID = 1000


def raw_schema() -> Schema:
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        BinaryType,
        IntegerType,
        ListType,
        LongType,
        NestedField,
        StringType,
        StructType,
        TimestamptzType,
    )

    header = StructType(
        NestedField(10, "key", StringType(), required=True),
        NestedField(11, "value", BinaryType(), required=False),
    )
    return Schema(
        NestedField(1, "key", BinaryType(), required=False),
        NestedField(2, "value", BinaryType(), required=False),
        NestedField(3, "topic", StringType(), required=True),
        NestedField(4, "partition", IntegerType(), required=True),
        NestedField(5, "offset", LongType(), required=True),
        NestedField(6, "timestamp", TimestamptzType(), required=True),
        NestedField(7, "timestampType", IntegerType(), required=True),
        NestedField(8, "headers", ListType(9, header, element_required=True), required=True),
        identifier_field_ids=[4, 5],
    )


def partition_spec(schema: Schema, terms: tuple[PartitionTerm, ...], prefix: str = "") -> PartitionSpec:
    """The spec of ``terms`` over ``schema``'s columns (``prefix`` + the term's column: a typed table's are
    fields of its ``strata`` struct); fields are named as Iceberg's Java API names them (``timestamp_day``,
    ``key_bucket``; an identity field keeps its column's name)."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import (
        BucketTransform,
        DayTransform,
        HourTransform,
        IdentityTransform,
        MonthTransform,
        Transform,
        YearTransform,
    )

    fields = []
    for i, term in enumerate(terms):
        transform: Transform[Any, Any]
        if term.transform == "bucket":
            transform, name = BucketTransform(term.buckets), f"{term.column}_bucket"
        elif term.transform == "identity":
            transform, name = IdentityTransform(), term.column
        else:
            time = {
                "year": YearTransform,
                "month": MonthTransform,
                "day": DayTransform,
                "hour": HourTransform,
            }
            transform, name = time[term.transform](), f"{term.column}_{term.transform}"
        source = schema.find_field(prefix + term.column).field_id
        fields.append(PartitionField(source, _FIRST_PARTITION_FIELD_ID + i, transform, name))
    return PartitionSpec(*fields)


def raw_rows(batches: list[pa.RecordBatch]) -> pa.Table:
    """The decoded batches (``pipeline.decode``'s Arrow schema with headers) as one Arrow table, in
    (partition, offset) order."""
    import pyarrow as pa

    from pipeline.decode import arrow_schema

    table = pa.Table.from_batches(batches, schema=arrow_schema(True))
    return table.sort_by([("partition", "ascending"), ("offset", "ascending")])


def to_table_rows(batches: list[pa.RecordBatch], schema: Schema) -> pa.Table:
    """``raw_rows`` of the batches in the Iceberg schema's types."""
    return raw_rows(batches).cast(schema.as_arrow())


def dead_letter_schema() -> Schema:
    """The dead-letter table's: the raw columns (their ids) and ``error``, why the record has no typed row."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField, StringType

    raw = raw_schema()
    error = NestedField(12, "error", StringType(), required=True)
    return Schema(*raw.fields, error, identifier_field_ids=list(raw.identifier_field_ids))
