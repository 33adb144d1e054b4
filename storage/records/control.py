"""Control batches: the COMMIT and ABORT markers of transactions, as Kafka's Fetch serves them.

Strata stores no marker in an object: a marker is a ``txn_markers`` row (storage/metadata/
schema_transactions.py), and the Kafka fetch path serves it as the control batch Kafka's broker would have
written (``EndTransactionMarker``). Every other reader sees the marker's offset as a hole.

The batch is a RecordBatch v2 (codec.py) of one record:
- header: baseOffset = the marker's offset, partitionLeaderEpoch -1 (as every batch Strata writes),
  attributes 0x30 (transactional | control; uncompressed, CreateTime), lastOffsetDelta 0, baseTimestamp =
  maxTimestamp = when the transaction ended, the transaction's producer id and epoch, baseSequence -1,
  one record;
- the record: attributes 0, timestampDelta 0, offsetDelta 0;
  key (4 bytes): int16 version 0, int16 type (0 = ABORT, 1 = COMMIT);
  value (6 bytes): int16 version 0, int32 coordinator epoch (0: Strata's coordinator has no epochs);
  no headers.
"""

from __future__ import annotations

import struct

from storage.records.codec import _CRC_HEADER, CONTROL, TRANSACTIONAL
from storage.records.encode import _assemble_batch, _varint

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
ABORT, COMMIT = 0, 1


def control_batch(offset: int, producer_id: int, epoch: int, commit: bool, timestamp_ms: int) -> bytes:
    key = _KEY.pack(0, COMMIT if commit else ABORT)
    value = _VALUE.pack(0, 0)
    body = b"".join(
        (b"\x00", _varint(0), _varint(0), _varint(len(key)), key, _varint(len(value)), value, _varint(0))
    )
    record = _varint(len(body)) + body
    covered = _CRC_HEADER.pack(
        TRANSACTIONAL | CONTROL, 0, timestamp_ms, timestamp_ms, producer_id, epoch, -1, 1
    )
    return _assemble_batch(offset, covered, record)
