"""Executor side: turn one file's bytes into Arrow rows with the Kafka source's columns. No Spark here.

Every chunk is checked against its CRC before decoding; batch base offsets are relative to the chunk
(``base_offset`` comes from the driver's snapshot), and offsets that compaction removed simply have no
record, so the holes need no special handling beyond keeping [start, end).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from pipeline.snapshot import ChunkTask
from storage import fileformat, records

_LOG_APPEND_TIME = 0x08

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
BASE_FIELDS = [
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("timestampType", pa.int32()),
]


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = list(BASE_FIELDS)
    if include_headers:
        fields.append(("headers", HEADERS_TYPE))
    return pa.schema(fields)


def decode_file(
    content: bytes, tasks: Sequence[ChunkTask], include_headers: bool, object_key: str = ""
) -> pa.RecordBatch:
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    topics: list[str] = []
    partitions: list[int] = []
    offsets: list[int] = []
    timestamps: list[int] = []
    types: list[int] = []
    headers: list[list[dict[str, object]]] = []
    for task in tasks:
        data = memoryview(content)[task.position : task.position + task.length]
        fileformat.verify_chunk(data, task.crc, object_key=object_key)
        for header, batch in records.iter_batches(data, verify_crc=True):
            timestamp_type = 1 if header.attributes & _LOG_APPEND_TIME else 0
            for record in records.decode_records(batch, offset_base=task.base_offset, verify_crc=False):
                if not task.start <= record.offset < task.end:
                    continue
                keys.append(record.key)
                values.append(record.value)
                topics.append(task.topic)
                partitions.append(task.partition)
                offsets.append(record.offset)
                timestamps.append(record.timestamp * 1000)
                types.append(timestamp_type)
                if include_headers:
                    headers.append([{"key": h.key, "value": h.value} for h in record.headers])
    columns: list[pa.Array] = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array(topics, pa.string()),
        pa.array(partitions, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array(timestamps, pa.timestamp("us", tz="UTC")),
        pa.array(types, pa.int32()),
    ]
    if include_headers:
        columns.append(pa.array(headers, HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))
