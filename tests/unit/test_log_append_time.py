"""``message.timestamp.type=LogAppendTime``: the config's values, the Kafka door's stamp (``check_batches``),
the HTTP encoders, the Produce answer's ``log_append_time_ms``, and the batch rewrites (re-compression,
compaction's filter and delete horizon) keeping the type and the append time.

Producer batches are written by kafka-python's record builder, as a client writes them; what is stored is
read back with ``storage.records``, CRCs checked.
"""

from __future__ import annotations

import random

import pytest
from kafka.protocol.producer.produce import ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from agents.encode import ProduceRecord, RequestEncoder
from broker import errors, produce_codec
from broker.batches import BatchRejected, check_batches
from storage import records
from storage.errors import InvalidConfig, InvalidTimestamp
from storage.metadata.rows import TopicInfo
from storage.records import compression
from storage.records.columns import scan_columns
from storage.topic_config import HOUR_MS, TopicConfig, effective_configs, validate_configs

NOW = 1_700_000_000_000
DAY_MS = 24 * HOUR_MS
LAT = {"message.timestamp.type": "LogAppendTime"}
LOG_APPEND_TIME = 0x08


def config(**overrides: str) -> TopicConfig:
    return TopicConfig.from_overrides(overrides)


def lat_config(**overrides: str) -> TopicConfig:
    return TopicConfig.from_overrides({**LAT, **overrides})


def producer_batch(
    timestamps: list[int], codec: int = 0, producer_id: int = -1, epoch: int = -1, sequence: int = -1
) -> bytes:
    """A batch as a Kafka client writes it: CreateTime, the given record timestamps."""
    builder = DefaultRecordBatchBuilder(2, codec, 0, producer_id, epoch, sequence, 1 << 20)
    for i, ts in enumerate(timestamps):
        builder.append(i, ts, f"k{i}".encode(), f"value {i} ".encode() * 5, [("h", str(i).encode())])
    return bytes(builder.build())


def only_header(data: bytes | memoryview) -> records.BatchHeader:
    ((header, _),) = list(records.iter_batches(data))  # the CRC checked
    return header


# --- the config -----------------------------------------------------------------------------------------


def test_both_of_kafkas_values_are_accepted_and_nothing_else() -> None:
    assert effective_configs({})["message.timestamp.type"] == "CreateTime"
    assert not config().log_append_time
    for value in ("CreateTime", "LogAppendTime"):
        assert validate_configs({"message.timestamp.type": value}) == {"message.timestamp.type": value}
    assert config(**LAT).log_append_time
    assert not config(**{"message.timestamp.type": "CreateTime"}).log_append_time
    for bad in ("logappendtime", "LOG_APPEND_TIME", "createtime", "LogAppendTime ", "", "NoTimestampType", 1):
        with pytest.raises(
            InvalidConfig, match=r"message\.timestamp\.type must be CreateTime or LogAppendTime"
        ):
            validate_configs({"message.timestamp.type": bad})


# --- the Kafka door: check_batches ----------------------------------------------------------------------


def test_a_log_append_time_topic_stamps_each_batch_and_keeps_its_records() -> None:
    sent = [producer_batch([NOW - 5_000, NOW - 7_000, NOW - 6_000], producer_id=7, epoch=1, sequence=3)]
    sent.append(producer_batch([NOW - 1_000]))
    frame = b"".join(sent)
    out = check_batches("t", 0, memoryview(frame), lat_config(), NOW)
    assert frame == b"".join(sent)  # the request frame is not written to
    assert len(out) == 2
    for batch, original in zip(out, sent, strict=True):
        header, before = only_header(batch.data), only_header(original)
        assert header.attributes == before.attributes | LOG_APPEND_TIME
        assert (header.max_timestamp, header.append_time) == (NOW, NOW)
        assert (batch.min_timestamp, batch.max_timestamp) == (NOW, NOW)  # the chunk index's times
        # Everything else as sent: baseTimestamp (the records' own times stay), producer fields, size.
        assert header._replace(attributes=0, max_timestamp=0, crc=0) == before._replace(
            attributes=0, max_timestamp=0, crc=0
        )
        assert bytes(batch.data)[61:] == original[61:]
        got = list(records.decode_records(batch.data))
        assert [r.timestamp for r in got] == [NOW] * len(got)
        assert [(r.key, r.value, r.headers) for r in got] == [
            (r.key, r.value, r.headers) for r in records.decode_records(original)
        ]
    assert (out[0].producer_id, out[0].producer_epoch, out[0].base_sequence) == (7, 1, 3)


def test_a_create_time_topic_stores_the_frames_bytes_uncopied() -> None:
    frame = producer_batch([NOW - 5_000, NOW - 4_000])
    (batch,) = check_batches("t", 0, memoryview(frame), config(), NOW)
    assert isinstance(batch.data, memoryview)
    assert batch.data.obj is frame
    assert only_header(batch.data).append_time is None
    assert (batch.min_timestamp, batch.max_timestamp) == (NOW - 5_000, NOW - 4_000)


@pytest.mark.parametrize("timestamps", [[NOW - 30 * DAY_MS], [NOW + 2 * HOUR_MS], [-1, NOW], [0, 2**62]])
def test_the_create_time_window_does_not_apply(timestamps: list[int]) -> None:
    window = {"message.timestamp.before.max.ms": str(HOUR_MS), "message.timestamp.after.max.ms": str(HOUR_MS)}
    batch = producer_batch(timestamps)
    with pytest.raises(BatchRejected) as refused:
        check_batches("t", 0, batch, config(**window), NOW)
    assert refused.value.code == errors.INVALID_TIMESTAMP
    (stored,) = check_batches("t", 0, batch, lat_config(**window), NOW)
    assert [r.timestamp for r in records.decode_records(stored.data)] == [NOW] * len(timestamps)


def test_a_producers_own_timestamp_type_and_max_timestamp_are_the_brokers_to_set() -> None:
    # As Kafka's broker (setMaxTimestamp on every appended batch): a batch that claims LogAppendTime, or
    # whose maxTimestamp is not its largest record timestamp, is stored with the topic's type and the
    # right maxTimestamp; its records are kept byte for byte.
    sent = producer_batch([NOW - 5_000, NOW - 3_000, NOW - 4_000])
    header = only_header(sent)
    claims = records.stamp_log_append_time(sent, header, NOW + 77)
    lies = records.set_max_timestamp(sent, header, False, NOW + 77)
    for bad in (claims, lies):
        (stored,) = check_batches("t", 0, bad, config(), NOW)
        got = only_header(stored.data)
        assert (got.attributes, got.max_timestamp) == (header.attributes, NOW - 3_000)
        assert (stored.min_timestamp, stored.max_timestamp) == (NOW - 5_000, NOW - 3_000)
        assert bytes(stored.data) == sent
        (stamped,) = check_batches("t", 0, bad, lat_config(), NOW)
        assert only_header(stamped.data).append_time == NOW


@pytest.mark.parametrize(
    ("sent_codec", "target"),
    [
        (compression.GZIP, "producer"),  # stamped, the compressed bytes kept
        (compression.GZIP, "zstd"),  # re-compressed and stamped
        (compression.NONE, "lz4"),
        (compression.SNAPPY, "uncompressed"),
    ],
)
def test_compressed_and_recompressed_batches_keep_the_stamp(sent_codec: int, target: str) -> None:
    sent = producer_batch([NOW - 3_000, NOW - 2_000, NOW - 9_000], codec=sent_codec)
    (batch,) = check_batches("t", 0, sent, lat_config(**{"compression.type": target}), NOW)
    header = only_header(batch.data)
    expected_codec = sent_codec if target == "producer" else compression.CODEC_IDS.get(target, 0)
    assert header.attributes == expected_codec | LOG_APPEND_TIME
    assert (header.max_timestamp, header.base_timestamp) == (NOW, NOW - 3_000)
    got = list(records.decode_records(batch.data))
    assert [r.timestamp for r in got] == [NOW] * 3
    assert [r.value for r in got] == [r.value for r in records.decode_records(sent)]


# --- the Produce answer ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 5, 8, 9])
def test_the_produce_answer_carries_the_append_time(version: int) -> None:
    answer = produce_codec.encode_response(
        9,
        version,
        [
            (
                "t",
                [
                    produce_codec.PartitionResponse(0, errors.NONE, 12, log_append_time_ms=NOW),
                    produce_codec.PartitionResponse(1, errors.NONE, 3),
                ],
            )
        ],
    )
    decoded = ProduceResponse[version].decode(answer[4:], version=version, header=True)
    assert [p.log_append_time_ms for p in decoded.responses[0].partition_responses] == [NOW, -1]


# --- the HTTP door --------------------------------------------------------------------------------------


def http_records() -> list[ProduceRecord]:
    return [
        ProduceRecord(b"a", b"1", timestamp=NOW - 30 * DAY_MS),  # outside a one-hour window
        ProduceRecord(b"b", b"2"),
        ProduceRecord(b"c", None, timestamp=NOW + 2 * HOUR_MS),
    ]


def http_items() -> list[dict[str, object]]:
    return [
        {"key": "a", "value": "1", "timestamp": NOW - 30 * DAY_MS},
        {"key": "b", "value": "2"},
        {"key": "c", "value": None, "timestamp": NOW + 2 * HOUR_MS},
    ]


@pytest.mark.parametrize("codec", ["producer", "gzip"])
def test_both_http_encoders_write_stamped_batches(codec: str) -> None:
    window = {"message.timestamp.before.max.ms": str(HOUR_MS), "compression.type": codec}
    info = TopicInfo("t", 1, {}, 0)
    by_records = RequestEncoder(random.Random(1)).encode(info, lat_config(**window), http_records(), NOW)
    by_text = RequestEncoder(random.Random(1)).encode_text(info, lat_config(**window), http_items(), NOW)
    assert by_text is not None  # the C loop took the records: the window does not apply
    for request in (by_records, by_text):
        (batch,) = request.batches
        header = only_header(batch.data)
        assert header.attributes == compression.CODEC_IDS.get(codec, 0) | LOG_APPEND_TIME
        assert (header.max_timestamp, header.base_timestamp) == (NOW, NOW - 30 * DAY_MS)
        assert (batch.min_timestamp, batch.max_timestamp) == (NOW, NOW)
        got = list(records.decode_records(batch.data))
        assert [(r.key, r.value, r.timestamp) for r in got] == [
            (b"a", b"1", NOW),
            (b"b", b"2", NOW),
            (b"c", None, NOW),
        ]
    assert bytes(by_records.batches[0].data) == bytes(by_text.batches[0].data)
    # On a CreateTime topic the same window refuses the first record.
    with pytest.raises(InvalidTimestamp):
        RequestEncoder(random.Random(1)).encode(info, config(**window), http_records(), NOW)


def test_http_still_refuses_a_timestamp_no_reader_can_represent() -> None:
    info = TopicInfo("t", 1, {}, 0)
    with pytest.raises(InvalidTimestamp, match="between 0 and"):
        RequestEncoder(random.Random(1)).encode(
            info, lat_config(), [ProduceRecord(b"a", b"1", timestamp=-1)], NOW
        )
    assert (
        RequestEncoder(random.Random(1)).encode_text(info, lat_config(), [{"key": "a", "timestamp": -1}], NOW)
        is None
    )


# --- rewrites: compaction and re-compression ------------------------------------------------------------


def stored_lat_batch(codec: int = 0) -> tuple[bytes, records.BatchHeader]:
    sent = producer_batch([NOW - 3_000, NOW - 2_000, NOW - 1_000], codec=codec)
    (batch,) = check_batches("t", 0, sent, lat_config(), NOW)
    data = bytes(batch.data)
    return data, only_header(data)


@pytest.mark.parametrize("codec", [compression.NONE, compression.ZSTD])
def test_compactions_filter_keeps_the_type_and_the_append_time(codec: int) -> None:
    data, header = stored_lat_batch(codec)
    key = bytes(16)
    cols = scan_columns(data, header, 100, key, key)  # compaction's scan, as planner/job_run.py runs it
    assert cols.timestamps.tolist() == [NOW] * 3
    for horizon in (None, NOW + DAY_MS):  # a plain filter, and one that sets a delete horizon
        kept = [0, 2]
        out = records.filter_ranges(
            data,
            header,
            [int(cols.offsets[i]) for i in kept],
            int(cols.timestamps[kept].max()),
            [(int(cols.starts[i]), int(cols.ends[i])) for i in kept],
            offset_base=100,
            base_offset=0,
            delete_horizon_ms=horizon,
        )
        rewritten = only_header(out)
        assert rewritten.append_time == NOW
        assert rewritten.attributes & 0x07 == codec
        assert rewritten.delete_horizon_ms == horizon
        got = list(records.decode_records(out, offset_base=100))
        assert [(r.offset, r.timestamp) for r in got] == [(100, NOW), (102, NOW)]


def test_encode_and_stamp_agree() -> None:
    recs = [records.Record(i, NOW - 100 + i, b"k", b"v") for i in range(3)]
    plain = records.encode_batch(recs)
    stamped = records.stamp_log_append_time(plain, only_header(plain), NOW)
    assert records.encode_batch(recs, log_append_time=NOW) == stamped
    assert records.recompress_batch(plain, only_header(plain), 0, log_append_time=NOW) == stamped
    assert records.batch_of_records(plain[61:], 3, NOW - 100, NOW - 98, 0, NOW) == stamped
