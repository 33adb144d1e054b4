"""Executor side: turn one file's bytes into Arrow rows with the Kafka source's columns. No Spark here.

Every chunk is checked against its CRC before decoding; batch base offsets are relative to the chunk
(``base_offset`` comes from the driver's snapshot), and offsets that compaction removed simply have no
record, so the holes need no special handling beyond keeping [start, end). A task's aborted transactions
(read_committed, ``ChunkTask.aborted``) drop each transactional batch of theirs (its producer id, and its
absolute base offset within the transaction's first offset .. ABORT marker): Kafka's consumer rule, the
rule compaction's ``TxnFilter`` applies. Such a batch is dropped once its header and CRC are checked, so
damage there still fails the read, and before its records are decoded, as the JVM decoder does.

Without headers (the Kafka source's default), records are decoded straight into Arrow buffers by C
(``storage/_recordcols.c``: no Python object per record); with headers, or wherever that loop declines
(anything but plainly valid bytes), through ``records.decode_records`` (``decode_file_reference``),
which also raises the precise error. Tests hold the two to the same rows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from pipeline.snapshot import ChunkTask
from planner.txn_filter import TxnFilter
from storage import fileformat, records
from storage._recordcols import decode_columns
from storage.errors import CodecError
from storage.records.codec import LOG_APPEND_TIME

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


log = logging.getLogger("strata.spark")

_INT64_MAX = (1 << 63) - 1
# Milliseconds whose microseconds still fit in Arrow's int64 timestamp.
_MAX_MS = _INT64_MAX // 1000


def decode_file(
    content: bytes | memoryview,
    tasks: Sequence[ChunkTask],
    include_headers: bool,
    object_key: str = "",
    *,
    fail_on_data_loss: bool = True,
) -> pa.RecordBatch:
    """The rows of one file's chunks (``content``: the whole object), in the order of ``tasks``.
    ``fail_on_data_loss=False``: a damaged chunk is skipped from the damage on, and logged with its range."""
    if not include_headers:
        batch = _decode_columns(content, tasks, object_key)
        if batch is not None:
            return batch
    return decode_file_reference(content, tasks, include_headers, object_key, fail_on_data_loss)


def aborted_filter(task: ChunkTask) -> TxnFilter | None:
    """What drops the batches of the task's aborted transactions; None when it has none. Its stable
    offset is the task's end: a task never reads at or past the LSO."""
    return TxnFilter.of(task.end, task.aborted) if task.aborted else None


def _decode_columns(
    content: bytes | memoryview, tasks: Sequence[ChunkTask], object_key: str
) -> pa.RecordBatch | None:
    """``decode_file`` without headers through the C loop; None where it declines."""
    columns = tuple(bytearray() for _ in range(8))
    runs: list[tuple[int, str, int, int]] = []  # (rows, topic, partition, timestampType)
    view = memoryview(content)
    try:
        for task in tasks:
            data = view[task.position : task.position + task.length]
            fileformat.verify_chunk(data, task.crc, object_key=object_key)
            aborted = aborted_filter(task)
            # batches_for_c has decompressed a batch before it is dropped here: where that fails, the
            # reference decides (it drops the batch first), so both give the same rows.
            for header, args in records.batches_for_c(data, task.base_offset):
                if aborted is not None and aborted.aborted_batch(
                    header, task.base_offset + header.base_offset
                ):
                    continue
                n = decode_columns(columns, *args, task.start, task.end)  # type: ignore[arg-type]
                if n is None:
                    return None
                if n:
                    runs.append((n, task.topic, task.partition, 0 if header.append_time is None else 1))
    except CodecError:
        return None
    offsets, timestamps, key_ends, key_valid, key_data, value_ends, value_valid, value_data = columns
    n = len(offsets) // 8
    millis = np.frombuffer(timestamps, dtype=np.int64)
    if n and (int(millis.max()) > _MAX_MS or int(millis.min()) < -_MAX_MS):
        return None  # the reference raises the overflow
    counts = np.array([r[0] for r in runs], dtype=np.int64)
    topic_names = {r[1] for r in runs}
    if len(topic_names) == 1:
        topic = pa.repeat(pa.scalar(topic_names.pop(), pa.string()), n)
    else:
        topic = pa.array(np.repeat(np.array([r[1] for r in runs], dtype=object), counts), pa.string())
    arrays = [
        _binary(n, key_ends, key_valid, key_data),
        _binary(n, value_ends, value_valid, value_data),
        topic,
        pa.array(np.repeat(np.array([r[2] for r in runs], dtype=np.int32), counts), pa.int32()),
        pa.array(np.frombuffer(offsets, dtype=np.int64), pa.int64()),
        pa.array(millis * 1000, pa.timestamp("us", tz="UTC")),
        pa.array(np.repeat(np.array([r[3] for r in runs], dtype=np.int32), counts), pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(False))


def _binary(n: int, ends: bytearray, valid: bytearray, data: bytearray) -> pa.Array:
    """A binary array from the C loop's buffers (no copy of the data)."""
    flags = np.frombuffer(valid, dtype=np.uint8)
    nulls = n - int(flags.sum())
    bitmap = pa.py_buffer(np.packbits(flags, bitorder="little")) if nulls else None
    value_offsets = np.zeros(n + 1, dtype=np.int32)
    value_offsets[1:] = np.frombuffer(ends, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.binary(), n, [bitmap, pa.py_buffer(value_offsets), pa.py_buffer(data)], null_count=nulls
    )


def decode_file_reference(
    content: bytes | memoryview,
    tasks: Sequence[ChunkTask],
    include_headers: bool,
    object_key: str = "",
    fail_on_data_loss: bool = True,
) -> pa.RecordBatch:
    """``decode_file`` through ``records.decode_records``: the reference, headers included. A batch that
    fails its checks fails the read, or (``fail_on_data_loss=False``) ends its chunk's rows there."""
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    topics: list[str] = []
    partitions: list[int] = []
    offsets: list[int] = []
    timestamps: list[int] = []
    types: list[int] = []
    headers: list[list[dict[str, object]]] = []
    columns_so_far = (keys, values, topics, partitions, offsets, timestamps, types, headers)
    for task in tasks:
        try:
            _decode_chunk(content, task, include_headers, object_key, columns_so_far)
        except CodecError as exc:
            if fail_on_data_loss:
                raise
            log.warning(
                "skipping damaged data (failOnDataLoss=false): %s, from offset %d of %s/%d",
                exc.message,
                task.base_offset,
                task.topic,
                task.partition,
            )
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


_Columns = tuple[
    list[bytes | None],
    list[bytes | None],
    list[str],
    list[int],
    list[int],
    list[int],
    list[int],
    list[list[dict[str, object]]],
]


def _decode_chunk(
    content: bytes | memoryview, task: ChunkTask, include_headers: bool, object_key: str, out: _Columns
) -> None:
    """Append one chunk's kept rows to ``out``, a batch at a time: a batch that fails leaves none of its
    rows behind (``CodecError``), and the rows of the batches before it stay."""
    keys, values, topics, partitions, offsets, timestamps, types, headers = out
    data = memoryview(content)[task.position : task.position + task.length]
    fileformat.verify_chunk(data, task.crc, object_key=object_key)
    aborted = aborted_filter(task)
    for header, batch in records.iter_batches(data, verify_crc=True):
        if aborted is not None and aborted.aborted_batch(header, task.base_offset + header.base_offset):
            continue
        timestamp_type = 1 if header.attributes & LOG_APPEND_TIME else 0
        decoded = list(records.decode_records(batch, offset_base=task.base_offset, verify_crc=False))
        for record in decoded:
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
