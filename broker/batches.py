"""Checking the record batches a Kafka producer sends, before they are stored exactly as sent.

The batch layout is the RecordBatch v2 documented in storage/records/codec.py. A producer's batch is
accepted only if every check Kafka's broker makes on it (LogValidator) holds here too:
- magic 2 (CORRUPT_MESSAGE otherwise); a whole number of well-framed batches: a truncated batch, an
  impossible length or record count, or a control batch is INVALID_RECORD, as Kafka answers (clients do
  not retry it); a CRC-32C that does not match is CORRUPT_MESSAGE (clients may retry: the bytes may have
  been damaged on the way);
- a codec Kafka defines: none, gzip, snappy, lz4 or zstd (codec ids 5-7: UNSUPPORTED_COMPRESSION_TYPE);
  zstd only from Produce v7 on, and served only to Fetch v10 on (KIP-110; UNSUPPORTED_COMPRESSION_TYPE);
- not a control batch (INVALID_RECORD): markers are written by the transaction coordinator only; a
  transactional batch (attributes bit 4) has a producer id, and its producer's transaction is checked
  where the flush commit gives it offsets (storage/metadata/sql/txn_append.py);
- relative offsets 0..n-1, so the commit can give the batch n consecutive offsets (INVALID_RECORD);
- at most ``max.message.bytes`` per batch (MESSAGE_TOO_LARGE), as Kafka counts it (the bytes as sent);
- a batch with a producer id (>= 0) has a sequence and an epoch >= 0 (INVALID_RECORD, as Kafka's
  LogValidator for the sequence); its producer fields go with it to the commit's sequence check;
- every record of the batch, walked in C (``storage/records/check.py``; a compressed batch decompressed
  once, within ``compression.output_limit``): it parses, its offset delta is its index, and on a
  compacted topic it has a key (INVALID_RECORD,
  with the record's index for Produce v8's ``record_errors``; a stream that does not decompress is
  CORRUPT_MESSAGE);
- in a compressed batch, every record at most ``max.decompressed.message.bytes`` once decompressed
  (INVALID_RECORD without ``record_errors``, as Kafka 4.4 answers);
- on a CreateTime topic, every record timestamp inside the topic's window (INVALID_TIMESTAMP), from the
  smallest and largest. A LogAppendTime topic checks no record timestamp: Kafka validates timestamps for
  CreateTime only, and no reader reads a LogAppendTime batch's record timestamps.
- on a topic with schema validation (``confluent.{key,value}.schema.validation``), every record's key or
  value names a schema registered under the strategy's subject (registry/validate.py, on the records the
  check above walked, decompressed once): INVALID_RECORD naming the first record that does not, with
  ``record_errors``. Its ``SchemaCheck`` is built by ``schema_check``; one made with ``load=False`` (on
  the event loop) raises ``Unresolved`` when the schema cache cannot answer without the metadata store,
  and the caller checks the partition again in the check threads (broker/handlers/produce.py). A topic
  without validation gets no check at all.

A partition whose batches are all stored as sent (CreateTime, ``compression.type`` producer or
uncompressed, no schema validation) and are what a well-behaved producer sends (uncompressed, every rule
above holding, maxTimestamp right) is checked in one call to storage/_recordcheck.c ``plain_batches``,
which builds no header object: that runs once per partition of every Produce request, on the event loop.
Anything else takes the careful path below, which is the authority on every refusal and its message;
tests/unit/test_plain_batches.py holds the two to the same result on any bytes and config.

A batch that only passes its CRC is never stored: a record no reader can decode would stop every reader
of its partition at its offset. Checking a compressed batch costs its decompression, which the Kafka door
runs off the event loop (``broker/handlers/produce.py``), so that a small batch inflating to tens of MiB
delays no other producer.

Otherwise the bytes go to the buffer as they came (the flusher patches only baseOffset, which the CRC does
not cover), with three exceptions, each made on a copy of that batch only (a batch kept as sent stays a
view into the request frame):
- on a CreateTime topic, a batch whose maxTimestamp is not its largest record timestamp, or which sets
  the LogAppendTime bit itself, is stored with the right maxTimestamp, CreateTime, and a new CRC
  (``records.set_max_timestamp``), as Kafka's broker rewrites every batch it appends; the records stay.
- ``message.timestamp.type=LogAppendTime`` stamps every batch as Kafka's broker does
  (``DefaultRecordBatch.setMaxTimestamp``): attributes bit 3 set, maxTimestamp = the agent's time when
  the batch is checked, a new CRC (``records.stamp_log_append_time``); baseTimestamp and the records stay
  as sent. The chunk index takes the append time as the batch's smallest and largest timestamp, so
  ListOffsets by time and max timestamp find it.
- ``compression.type``: ``producer`` (the default) stores every batch as sent. A codec name (or
  ``uncompressed``) stores a batch as sent when it already uses that codec, and otherwise stores it
  re-compressed with that codec at the topic's ``compression.<codec>.level`` (``records.recompress_batch``:
  the same records and header fields, a new CRC, and on a LogAppendTime topic the stamp), as Kafka's broker
  re-compresses; the re-compressed batch must fit ``max.message.bytes`` too. The HTTP produce path
  (agents/encode.py) writes its batches with the topic's codec and level, uncompressed for ``producer``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from agents.buffer import PartitionBatch
from agents.encode import MAX_TIMESTAMP_MS, check_timestamp
from broker import errors
from registry.verdicts import RecordRefused, SchemaValidator, Tally, rules_of
from storage import records
from storage._recordcheck import any_compressed, plain_batches
from storage.errors import CodecError, InvalidRecord, InvalidTimestamp, RecordTooLarge
from storage.records import compression
from storage.records.check import check_batch
from storage.records.codec import (
    COMPRESSION_MASK,
    CONTROL,
    LOG_APPEND_TIME,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL,
)
from storage.topic_config import TopicConfig

# attributes: int16 at byte 21 of a batch (after baseOffset 8, batchLength 4, leaderEpoch 4, magic 1, crc 4).
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_AT = 21
_MAGIC_AT = 16


class BatchRejected(Exception):
    """A partition's records are refused with a Kafka error code; the other partitions are unaffected.
    ``record_errors``: (index of the record in its batch, why), for Produce v8's answer."""

    def __init__(self, code: int, message: str, record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.record_errors = record_errors or []


def _reject(code: int, message: str) -> BatchRejected:
    return BatchRejected(code, message)


# A partition's schema check: a batch's records section (buffer, start, end) and its header. Raises
# RecordRefused, or Unresolved (registry/verdicts.py) when built with load=False.
SchemaCheck = Callable[[bytes | memoryview, int, int, records.BatchHeader], None]


def schema_check(
    validator: SchemaValidator | None, topic: str, config: TopicConfig, load: bool, tally: Tally
) -> SchemaCheck | None:
    """The topic's schema check, or None when it validates nothing (then produce pays nothing for it).
    ``load``: whether the check may read the metadata store (off the event loop only); ``tally``: the
    attempt's counts, for ``RecordValidator.record`` once it is decided."""
    if not config.schema_validation:
        return None
    rules = rules_of(config)
    if validator is None:

        def refuse(_: bytes | memoryview, __: int, ___: int, ____: records.BatchHeader) -> None:
            raise _reject(
                errors.INVALID_RECORD, f"topic {topic!r} validates schemas; this agent has no registry"
            )

        return refuse

    def check(buf: bytes | memoryview, start: int, end: int, header: records.BatchHeader) -> None:
        count, last_delta = header.records_count, header.last_offset_delta
        validator.check(topic, rules, buf, start, end, count, last_delta, load=load, tally=tally)

    return check


def check_batches(
    topic: str,
    partition: int,
    data: bytes | memoryview,
    config: TopicConfig,
    now_ms: int,
    zstd_allowed: bool = True,
    schemas: SchemaCheck | None = None,
) -> list[PartitionBatch]:
    """One PartitionBatch per producer batch in ``data``, or BatchRejected. ``zstd_allowed``: the request's
    version may carry zstd (Produce v7 and later). On a LogAppendTime topic every batch is stamped with
    ``now_ms``, then each PartitionBatch's min and max timestamp. ``schemas``: the topic's schema check."""
    view = memoryview(data)
    end = len(view)
    append_time = now_ms if config.log_append_time else None
    target = config.compression_codec
    as_sent = not (config.log_append_time or target or schemas)  # then perhaps the fast path
    if as_sent and (plain := _plain(topic, partition, view, config, now_ms)) is not None:
        return plain
    compacted = config.compacted
    max_bytes = config.max_message_bytes
    max_record_bytes = config.max_decompressed_message_bytes
    out: list[PartitionBatch] = []
    pos = 0
    try:
        # One pass, no generator: this runs once per partition of every Produce request, on the loop.
        while pos < end:
            codec = _precheck(view, pos, zstd_allowed)
            header = _framed(view, pos)
            _check_header(header, max_bytes)
            size = header.size
            # A view into the request frame: the batch is stored from the frame's buffer, copied only when
            # its bytes change (a LogAppendTime stamp, a re-compression).
            batch: bytes | memoryview = view[pos : pos + size]
            pos += size
            checked = check_batch(batch, header, compacted, max_record_bytes)
            if append_time is None:  # Kafka checks record timestamps, range included, for CreateTime only
                check_timestamp(0, checked.min_timestamp, now_ms, config)
                check_timestamp(0, checked.max_timestamp, now_ms, config)
                if header.max_timestamp != checked.max_timestamp or header.attributes & LOG_APPEND_TIME:
                    # As Kafka's setMaxTimestamp: the header says what the records say, CreateTime.
                    batch = records.set_max_timestamp(batch, header, False, checked.max_timestamp)
                    header = header._replace(
                        attributes=header.attributes & ~LOG_APPEND_TIME, max_timestamp=checked.max_timestamp
                    )
            if schemas is not None:
                if checked.records is None:
                    schemas(batch, RECORD_BATCH_OVERHEAD, size, header)
                else:
                    schemas(checked.records, 0, len(checked.records), header)
            if (target is not None and codec != target) or append_time is not None:
                batch = _rewritten(batch, header, codec, checked.records, config, append_time)
            out.append(
                PartitionBatch(
                    topic,
                    partition,
                    batch,
                    header.records_count,
                    checked.min_timestamp if append_time is None else append_time,
                    checked.max_timestamp if append_time is None else append_time,
                    # Kafka's "no producer" is -1; anything below it means the same.
                    max(header.producer_id, -1),
                    header.producer_epoch,
                    header.base_sequence,
                    bool(header.attributes & TRANSACTIONAL),
                )
            )
    except CodecError as exc:
        raise _reject(errors.CORRUPT_MESSAGE, exc.message) from None
    except InvalidRecord as exc:
        index = exc.record_index
        found = [] if index is None else [(index, exc.message)]
        raise BatchRejected(errors.INVALID_RECORD, exc.message, found) from None
    except RecordRefused as exc:
        raise BatchRejected(errors.INVALID_RECORD, exc.message, [(exc.index, exc.message)]) from None
    except (RecordTooLarge, InvalidTimestamp) as exc:
        raise _reject(errors.kafka_error(exc), exc.message) from None
    if not out:
        raise _reject(errors.INVALID_RECORD, "no record batch")
    return out


def _plain(
    topic: str, partition: int, view: memoryview, config: TopicConfig, now_ms: int
) -> list[PartitionBatch] | None:
    """The batches of a partition stored exactly as sent, checked at once by storage/_recordcheck.c; None
    when one is anything but what a well-behaved producer sends, and ``check_batches``' loop decides."""
    lowest = max(0, now_ms - config.message_timestamp_before_max_ms)
    highest = min(MAX_TIMESTAMP_MS, now_ms + config.message_timestamp_after_max_ms)
    return plain_batches(
        view, config.compacted, config.max_message_bytes, lowest, highest, PartitionBatch, topic, partition
    )


def _check_header(header: records.BatchHeader, max_bytes: int) -> None:
    """The rules on a batch's header fields: no transactions, offsets 0..n-1, the size, producer fields."""
    if header.attributes & CONTROL:
        raise _reject(errors.INVALID_RECORD, "a producer may not send a control batch")
    if header.attributes & TRANSACTIONAL and header.producer_id < 0:
        raise _reject(errors.INVALID_RECORD, "a transactional batch needs a producer id")
    if header.records_count < 1 or header.last_offset_delta != header.records_count - 1:
        raise _reject(
            errors.INVALID_RECORD,
            f"a batch with {header.records_count} records has lastOffsetDelta "
            f"{header.last_offset_delta}; expected records at relative offsets 0..n-1",
        )
    if header.size > max_bytes:
        raise RecordTooLarge(f"a batch of {header.size} bytes exceeds max.message.bytes={max_bytes}")
    if header.producer_id >= 0 and (header.base_sequence < 0 or header.producer_epoch < 0):
        raise _reject(
            errors.INVALID_RECORD,
            f"a batch of producer {header.producer_id} has sequence {header.base_sequence} and"
            f" epoch {header.producer_epoch}; both must be >= 0",
        )


def _framed(view: memoryview, pos: int) -> records.BatchHeader:
    """The header of the batch at ``pos``. As Kafka's broker answers: a batch whose framing is wrong
    (truncated, an impossible length or count, a control batch) is INVALID_RECORD, which clients do not
    retry; a CRC that does not match its bytes is CORRUPT_MESSAGE, which they may (the bytes may have been
    damaged on the way)."""
    try:
        header = records.read_header(view, pos, False)
    except CodecError as exc:
        raise _reject(errors.INVALID_RECORD, exc.message) from None
    records.verify_crc(view, pos, header)  # CodecError: CORRUPT_MESSAGE, below
    return header


def _rewritten(
    batch: bytes | memoryview,
    header: records.BatchHeader,
    codec: int,
    expanded: bytes | None,
    config: TopicConfig,
    append_time: int | None,
) -> bytes | memoryview:
    """The batch as the topic stores it: re-compressed to its ``compression.type`` when that names another
    codec, stamped LogAppendTime when ``append_time`` is given. ``expanded``: its records decompressed
    by the check, if it is compressed."""
    target = config.compression_codec
    if target is not None and codec != target:
        level = config.compression_level(target)
        stored = records.recompress_batch(batch, header, target, expanded, append_time, level)
        if len(stored) > config.max_message_bytes:
            raise RecordTooLarge(
                f"a batch stored with compression.type={config.compression_type} takes "
                f"{len(stored)} bytes, over max.message.bytes={config.max_message_bytes}"
            )
        return stored
    if append_time is None:
        return batch
    return records.stamp_log_append_time(batch, header, append_time)


# Whether a batch header in ``data`` names a codec other than none, read from the headers alone: what
# decides that a request is checked off the event loop. The C function itself, not a wrapper around it:
# it is asked once per partition of every Produce request.
has_compressed = any_compressed


def _precheck(view: memoryview, pos: int, zstd_allowed: bool) -> int:
    """The codec of the batch at ``pos``, from its header bytes; refuses a wrong magic, a codec Kafka does
    not define (its own code, before the codec would call the batch corrupt) and zstd below Produce v7."""
    if pos + records.RECORD_BATCH_OVERHEAD > len(view):
        return 0  # too short for a header: read_header says so
    if view[pos + _MAGIC_AT] != records.MAGIC:
        raise _reject(errors.CORRUPT_MESSAGE, f"a batch has magic {view[pos + _MAGIC_AT]}, expected 2")
    codec: int = _ATTRIBUTES.unpack_from(view, pos + _ATTRIBUTES_AT)[0] & COMPRESSION_MASK
    if codec not in compression.CODEC_NAMES:
        raise _reject(
            errors.UNSUPPORTED_COMPRESSION_TYPE,
            f"compression codec {codec} is not one of Kafka's (none, gzip, snappy, lz4, zstd)",
        )
    if codec == compression.ZSTD and not zstd_allowed:
        raise _reject(
            errors.UNSUPPORTED_COMPRESSION_TYPE, "zstd batches need Produce version 7 or later (KIP-110)"
        )
    return codec
