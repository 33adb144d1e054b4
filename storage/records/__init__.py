"""Kafka RecordBatch v2 records, sans-IO: the one import for the codec and its compaction helpers.

- ``storage/records/codec.py``: the byte layout (documented at its top), batch headers and framing.
- ``storage/records/decode.py``: the pure-Python reference decoder.
- ``storage/records/encode.py``: the pure-Python reference encoder, and base-offset patching.
- ``storage/records/scan.py``: rewriting stored batches: compaction's ``filter_batch`` (survivors copied
  byte for byte, delete horizon set), ``scan_batch_reference`` (keys and record spans, values skipped:
  the reference of compaction's C column scan, ``storage/records/columns.py``), ``recompress_batch`` (a
  batch's records in another codec) for the ``compression.type`` topic config, and
  ``stamp_log_append_time`` for ``message.timestamp.type=LogAppendTime``.
- ``storage/records/compiled.py``: ``decode_records`` and ``encode_batch`` compiled (aiokafka's Cython
  codec), with exactly the reference's bytes, records and errors.
- ``storage/records/compression.py``: the four codecs of compressed batches, bounded decompression.

Callers import from here (``from storage import records``); the split is by concept, not an API change.
"""

from __future__ import annotations

from storage.records.codec import (
    DELETE_HORIZON_FLAG,
    LOG_OVERHEAD,
    MAGIC,
    RECORD_BATCH_OVERHEAD,
    BatchArgs,
    BatchHeader,
    Header,
    Record,
    batch_for_c,
    batches_for_c,
    check_framing,
    count_records,
    expand_records,
    iter_batches,
    read_header,
    verify_crc,
)
from storage.records.compiled import decode_records, encode_batch
from storage.records.encode import batch_of_records, set_base_offset
from storage.records.scan import (
    RecordSpan,
    filter_batch,
    filter_ranges,
    recompress_batch,
    set_max_timestamp,
    stamp_log_append_time,
)

__all__ = [
    "DELETE_HORIZON_FLAG",
    "LOG_OVERHEAD",
    "MAGIC",
    "RECORD_BATCH_OVERHEAD",
    "BatchArgs",
    "BatchHeader",
    "Header",
    "Record",
    "RecordSpan",
    "batch_for_c",
    "batch_of_records",
    "batches_for_c",
    "check_framing",
    "count_records",
    "decode_records",
    "encode_batch",
    "expand_records",
    "filter_batch",
    "filter_ranges",
    "iter_batches",
    "read_header",
    "recompress_batch",
    "set_base_offset",
    "set_max_timestamp",
    "stamp_log_append_time",
    "verify_crc",
]
