"""Compaction's record scan as columns: one C loop per batch (``storage/_keyscan.c``) instead of a Python
object per record.

``scan_columns`` reads what ``scan_batch_reference`` reads (offsets, timestamps, keys, tombstone flags
and record spans; values skipped) and refuses malformed batches with the same ``CodecError`` messages,
but returns numpy arrays and, in place of each key, its two keyed SipHash-2-4 hashes: the offset map's
``(h1, h2)`` (``planner/offset_map.py``). Two refusals are its own: a record whose offset or timestamp
does not fit in 64 bits (the reference returns a Python int that no chunk row could store).

Why C and not a library: the C loop's docstring says; in short, nothing maintained scans RecordBatch v2
records into columns, and per-record Python objects and per-key ``hashlib`` calls were a large share of a
compaction's time. Survivors are then copied by their spans with ``filter_ranges``
(``storage/records/scan.py``), as ``filter_batch`` copies them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from storage._keyscan import scan_records, siphash24
from storage.errors import CodecError
from storage.records.codec import BatchHeader, expand_records

__all__ = ["SIPHASH_KEY_SIZE", "RecordColumns", "scan_columns", "siphash24"]

SIPHASH_KEY_SIZE = 16

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
Mask = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """One batch's records as columns (index i is the batch's i-th record, in offset order)."""

    offsets: I64
    timestamps: I64
    h1: U64
    h2: U64
    keyed: Mask
    tombstone: Mask
    starts: I64
    ends: I64


def scan_columns(
    batch: bytes | memoryview, header: BatchHeader, offset_base: int, key_a: bytes, key_b: bytes
) -> RecordColumns:
    """The records of ``batch`` (exactly one batch, as ``iter_batches`` yields it; CRC not re-checked),
    their keys hashed with SipHash-2-4 under ``key_a`` (h1) and ``key_b`` (h2), 16 bytes each."""
    if len(batch) != header.size:
        raise CodecError(f"batch is {len(batch)} bytes, its header says {header.size}")
    expanded, pos, end = expand_records(batch, header)
    result = scan_records(
        expanded,
        pos,
        end,
        header.records_count,
        offset_base,
        header.base_offset,
        header.base_timestamp,
        header.append_time,
        header.last_offset_delta,
        key_a,
        key_b,
    )
    if isinstance(result, str):
        raise CodecError(result)
    offsets, timestamps, h1, h2, flags, starts, ends = result
    flag_bits = np.frombuffer(flags, dtype=np.uint8)
    return RecordColumns(
        offsets=np.frombuffer(offsets, dtype=np.int64),
        timestamps=np.frombuffer(timestamps, dtype=np.int64),
        h1=np.frombuffer(h1, dtype=np.uint64),
        h2=np.frombuffer(h2, dtype=np.uint64),
        keyed=(flag_bits & 1).astype(np.bool_),
        tombstone=(flag_bits & 2).astype(np.bool_),
        starts=np.frombuffer(starts, dtype=np.int64),
        ends=np.frombuffer(ends, dtype=np.int64),
    )
