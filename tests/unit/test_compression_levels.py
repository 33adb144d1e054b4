"""Kafka's ``compression.{gzip,lz4,zstd}.level`` and ``max.decompressed.message.bytes`` topic configs: their
validation and DescribeConfigs entries as Kafka 4.4 declares them, the levels' bytes in every place Strata
compresses on a topic's behalf (``compression.compress`` and the batch writers over it, the Kafka door's
re-compression, both HTTP encoders, compaction's filter and its delete-horizon re-encode), and the
decompressed-record cap at the Kafka door's batch check.

What Kafka's own broker stores at these levels is compared in tests/kafka/test_compression_levels.py.
"""

from __future__ import annotations

import random
import zlib

import cramjam
import pytest
from kafka.protocol.admin.configs import DescribeConfigsRequest

from agents.encode import ProduceRecord, RequestEncoder
from broker import errors
from broker.batches import BatchRejected, check_batches
from storage import records
from storage.errors import InvalidConfig, InvalidRecord
from storage.metadata.rows import TopicInfo
from storage.records import compression
from storage.records.check import check_batch
from storage.records.columns import scan_columns
from storage.records.compression import GZIP, LZ4, SNAPPY, ZSTD, compress, decompress
from storage.topic_config import TopicConfig, effective_configs, validate_configs
from tests.fixtures.broker import BrokerParts, call

NOW = 1_700_000_000_000
LEVELS = ("compression.gzip.level", "compression.lz4.level", "compression.zstd.level")
CAP = "max.decompressed.message.bytes"
# Text-like records, so every level finds something to do.
DATA = b"".join(b'{"user": "user-%d", "event": "click", "page": "/p/%d"}' % (i % 97, i) for i in range(3000))


def gzip_body(stream: bytes) -> bytes:
    """A gzip member's deflate stream: what a level decides (the 10-byte header and 8-byte trailer do not)."""
    return stream[10:-8]


def zlib_deflate(data: bytes, level: int) -> bytes:
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return deflater.compress(data) + deflater.flush()


def cramjam_lz4(data: bytes, level: int) -> bytes:
    compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
    compressor.compress(data)
    return bytes(compressor.finish())


def section(batch: bytes | memoryview) -> bytes:
    """The batch's records section as stored (compressed or not)."""
    header = records.read_header(batch, 0, True)
    return bytes(memoryview(batch)[records.RECORD_BATCH_OVERHEAD : header.size])


# --- the configs ----------------------------------------------------------------------------------------


def test_defaults_are_kafkas() -> None:
    assert {k: effective_configs({})[k] for k in (*LEVELS, CAP)} == {
        "compression.gzip.level": "-1",
        "compression.lz4.level": "9",
        "compression.zstd.level": "3",
        "max.decompressed.message.bytes": "2147483639",
    }
    config = TopicConfig.from_overrides({})
    assert (config.compression_gzip_level, config.compression_lz4_level, config.compression_zstd_level) == (
        -1,
        9,
        3,
    )
    assert config.max_decompressed_message_bytes == 2**31 - 9
    assert [config.compression_level(c) for c in (0, GZIP, SNAPPY, LZ4, ZSTD)] == [None, -1, None, 9, 3]


@pytest.mark.parametrize(
    ("name", "good", "bad"),
    [
        # Kafka 4.4's validators (CompressionType.levelValidator, LogConfig): what a Kafka broker took and
        # refused with INVALID_CONFIG in the same probe.
        ("compression.gzip.level", ["-1", "1", "9"], ["0", "-2", "10"]),
        ("compression.lz4.level", ["1", "9", "17"], ["0", "18", "-1"]),
        ("compression.zstd.level", ["-131072", "0", "3", "22"], ["-131073", "23"]),
        (CAP, ["1", "100", "2147483639"], ["0", "-1", "2147483640"]),
    ],
)
def test_values_are_checked_as_kafka_checks_them(name: str, good: list[str], bad: list[str]) -> None:
    for value in good:
        assert validate_configs({name: value}) == {name: value}
        assert TopicConfig.from_overrides({name: value})  # and the effective config reads it
    for value in [*bad, "nine", "1.5", " 3", "", "99999999999999999999"]:
        with pytest.raises(InvalidConfig, match=name.replace(".", r"\.")):
            validate_configs({name: value})


async def test_describe_configs_gives_them_as_int_with_kafkas_sources(broker_parts: BrokerParts) -> None:
    broker_parts.metadata.create_topic("levels", 1, {"compression.zstd.level": "19", CAP: "1000"}, 0)
    request = DescribeConfigsRequest[4](
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=2, resource_name="levels", configuration_keys=[*LEVELS, CAP]
            )
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    answer = await call(broker_parts.ctx, request)
    got = {c.name: (c.value, c.config_source, c.config_type) for c in answer.results[0].configs}
    default, dynamic, int_type = 5, 1, 3
    assert got == {
        "compression.gzip.level": ("-1", default, int_type),
        "compression.lz4.level": ("9", default, int_type),
        "compression.zstd.level": ("19", dynamic, int_type),
        CAP: ("1000", dynamic, int_type),
    }


# --- compress: Kafka's levels onto the libraries --------------------------------------------------------


def test_gzip_levels_are_zlibs_and_minus_one_is_six() -> None:
    one, nine = compress(GZIP, DATA, 1), compress(GZIP, DATA, 9)
    assert len(one) > len(nine)
    assert gzip_body(one) == zlib_deflate(DATA, 1)
    assert gzip_body(nine) == zlib_deflate(DATA, 9)
    assert compress(GZIP, DATA, -1) == compress(GZIP, DATA, 6) == compress(GZIP, DATA)
    for packed in (one, nine):
        assert decompress(GZIP, packed, len(DATA)) == DATA


def test_lz4_levels_map_as_kafkas_writer_does() -> None:
    """Kafka's default 9 is lz4's fast compressor; other levels are HC at that level, 1 being HC's lowest
    (2) and 13-17 its highest (12)."""
    fast = cramjam_lz4(DATA, 0)
    assert compress(LZ4, DATA) == compress(LZ4, DATA, 9) == fast
    assert compress(LZ4, DATA, 1) == compress(LZ4, DATA, 2) == cramjam_lz4(DATA, 2) != fast
    for level in (3, 8, 10, 12):
        assert compress(LZ4, DATA, level) == cramjam_lz4(DATA, level)
    assert compress(LZ4, DATA, 13) == compress(LZ4, DATA, 17) == cramjam_lz4(DATA, 12)
    assert len(compress(LZ4, DATA, 12)) < len(compress(LZ4, DATA, 3)) < len(fast)
    for level in (1, 9, 17):
        assert decompress(LZ4, compress(LZ4, DATA, level), len(DATA)) == DATA


def test_zstd_levels_are_zstds() -> None:
    for level in (-131072, -5, 1, 19, 22):
        packed = compress(ZSTD, DATA, level)
        assert packed == bytes(cramjam.zstd.compress(DATA, level=level))
        assert decompress(ZSTD, packed, len(DATA)) == DATA
    assert compress(ZSTD, DATA, 0) == compress(ZSTD, DATA, 3) == compress(ZSTD, DATA)
    assert len(compress(ZSTD, DATA, 19)) < len(compress(ZSTD, DATA, 3)) < len(compress(ZSTD, DATA, -5))


@pytest.mark.parametrize(
    ("codec", "level"), [(GZIP, 0), (GZIP, 10), (LZ4, 0), (LZ4, 18), (ZSTD, 23), (SNAPPY, 1)]
)
def test_a_level_kafka_would_not_take_is_a_value_error(codec: int, level: int) -> None:
    assert not compression.valid_level(codec, level)
    with pytest.raises(ValueError, match="compression level"):
        compress(codec, DATA, level)


# --- the writers over it --------------------------------------------------------------------------------


def sample(n: int = 40) -> list[records.Record]:
    return [records.Record(i, NOW + i, f"k{i % 5}".encode(), DATA[i * 50 : i * 50 + 400]) for i in range(n)]


def test_encoders_and_the_recompression_write_the_level() -> None:
    recs = sample()
    plain = records.encode_batch(recs)
    raw = section(plain)
    header = records.read_header(plain, 0, True)
    for level in (1, 9):
        compiled = records.encode_batch(recs, codec=GZIP, level=level)
        reference = records.encode.encode_batch_reference(recs, codec=GZIP, level=level)
        recompressed = records.recompress_batch(plain, header, GZIP, level=level)
        c_loop = records.batch_of_records(raw, len(recs), NOW, NOW + len(recs) - 1, GZIP, None, level)
        assert compiled == reference == recompressed == c_loop
        assert gzip_body(section(compiled)) == zlib_deflate(raw, level)
        assert list(records.decode_records(compiled)) == recs
    assert records.encode_batch(recs, codec=GZIP, level=1) != records.encode_batch(recs, codec=GZIP, level=9)
    zstd19 = records.recompress_batch(plain, header, ZSTD, level=19)
    assert section(zstd19) == bytes(cramjam.zstd.compress(raw, level=19))


def test_the_kafka_door_recompresses_at_the_topics_level() -> None:
    sent = records.encode_batch(sample())  # uncompressed, as a producer might send it
    raw = section(sent)
    for level in ("1", "9"):
        config = TopicConfig.from_overrides({"compression.type": "gzip", "compression.gzip.level": level})
        (stored,) = check_batches("t", 0, sent, config, NOW)
        assert gzip_body(section(stored.data)) == zlib_deflate(raw, int(level))
        assert list(records.decode_records(stored.data)) == sample()
    config = TopicConfig.from_overrides({"compression.type": "lz4", "compression.lz4.level": "12"})
    (stored,) = check_batches("t", 0, records.encode_batch(sample(), codec=ZSTD), config, NOW)
    assert section(stored.data) == cramjam_lz4(raw, 12)


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd"])
def test_both_http_encoders_write_the_topics_level(codec: str) -> None:
    name = f"compression.{codec}.level"
    info = TopicInfo("t", 1, {}, 0)
    items = [{"key": f"k{i}", "value": DATA[i * 60 : i * 60 + 300].decode()} for i in range(30)]
    recs = [ProduceRecord(i["key"].encode(), i["value"].encode()) for i in items]
    written: dict[str, bytes] = {}
    for level in {"gzip": ("1", "9"), "lz4": ("3", "9"), "zstd": ("-5", "19")}[codec]:
        config = TopicConfig.from_overrides({"compression.type": codec, name: level})
        by_records = RequestEncoder(random.Random(1)).encode(info, config, recs, NOW)
        by_text = RequestEncoder(random.Random(1)).encode_text(info, config, items, NOW)
        assert by_text is not None  # the C loop took them: its Python compression applies the level
        ((one,), (other,)) = (by_records.batches, by_text.batches)
        assert bytes(one.data) == bytes(other.data)
        raw = section(records.encode_batch(list(records.decode_records(one.data))))
        expected = compress(compression.CODEC_IDS[codec], raw, int(level))
        assert section(one.data) == expected
        written[level] = section(one.data)
    assert len(set(written.values())) == 2


def test_compaction_rewrites_at_the_level_it_is_given() -> None:
    """planner/job_run.py passes the topic's level for the batch's codec (``TopicConfig.compression_level``);
    both the filter and the delete-horizon re-encode compress with it."""
    recs = [*sample(20), records.Record(20, NOW + 20, b"k0", None)]
    batch = records.encode_batch(recs, codec=ZSTD)
    header = records.read_header(batch, 0, True)
    key = bytes(16)
    cols = scan_columns(batch, header, 0, key, key)
    kept = list(range(0, 21, 2))
    for horizon in (None, NOW + 86_400_000):
        by_level = {}
        for level in (1, 19):
            out = records.filter_ranges(
                batch,
                header,
                [int(cols.offsets[i]) for i in kept],
                int(cols.timestamps[kept].max()),
                [(int(cols.starts[i]), int(cols.ends[i])) for i in kept],
                offset_base=0,
                base_offset=0,
                delete_horizon_ms=horizon,
                level=level,
            )
            raw = section(records.encode_batch(list(records.decode_records(out)), delete_horizon_ms=horizon))
            assert section(out) == bytes(cramjam.zstd.compress(raw, level=level))
            assert [r.offset for r in records.decode_records(out)] == kept
            by_level[level] = out
        assert by_level[1] != by_level[19]
    zstd = TopicConfig.from_overrides({"compression.zstd.level": "19"})
    assert zstd.compression_level(header.attributes & 0x07) == 19


# --- max.decompressed.message.bytes ---------------------------------------------------------------------


def record_body(value_size: int) -> int:
    """The body (after its length varint) of a keyless record with a value of ``value_size`` bytes."""
    batch = records.encode_batch([records.Record(0, NOW, None, b"v" * value_size)])
    return len(batch) - records.RECORD_BATCH_OVERHEAD - 2  # a two-byte length varint at these sizes


def capped(cap: int) -> TopicConfig:
    return TopicConfig.from_overrides({CAP: str(cap)})


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_a_compressed_batch_with_a_record_over_the_cap_is_invalid_record(codec: int) -> None:
    """The cap is on each record's body, as Kafka 4.4 reads it: a body of exactly the cap passes, one byte
    more refuses the whole batch with INVALID_RECORD and no record_errors (a Kafka broker answered so)."""
    assert record_body(93) == 100
    small = records.Record(0, NOW, None, b"v" * 10)
    for size, refused in ((93, False), (94, True)):
        batch = records.encode_batch(
            [small, records.Record(1, NOW, None, b"v" * size), records.Record(2, NOW, None, b"v")],
            codec=codec,
        )
        if not refused:
            check_batches("t", 0, batch, capped(100), NOW)
            continue
        with pytest.raises(BatchRejected) as caught:
            check_batches("t", 0, batch, capped(100), NOW)
        assert caught.value.code == errors.INVALID_RECORD
        assert caught.value.record_errors == []
        assert "record 1 is 101 bytes decompressed, more than max.decompressed.message.bytes=100" in (
            caught.value.message
        )


def test_the_cap_is_per_record_and_for_compressed_batches_only() -> None:
    many = records.encode_batch([records.Record(i, NOW, None, b"v" * 50) for i in range(10)], codec=GZIP)
    assert len(records.expand_records(many, records.read_header(many, 0, True))[0]) > 500
    assert len(check_batches("t", 0, many, capped(100), NOW)) == 1  # 10 records under the cap: taken
    plain = records.encode_batch([records.Record(0, NOW, None, b"v" * 5000)])
    assert len(check_batches("t", 0, plain, capped(100), NOW)) == 1  # Kafka bounds no uncompressed record
    big = records.encode_batch([records.Record(0, NOW, None, b"v" * 5000)], codec=LZ4)
    check_batches("t", 0, big, TopicConfig.from_overrides({}), NOW)  # the default caps nothing real
    with pytest.raises(InvalidRecord):
        check_batch(big, records.read_header(big, 0, True), False, 4999)
    check_batch(big, records.read_header(big, 0, True), False, None)


def test_the_cap_comes_before_recompression_and_stores_nothing() -> None:
    """A refused batch is never re-compressed or stored: check_batches raises for the partition."""
    config = TopicConfig.from_overrides({CAP: "100", "compression.type": "zstd"})
    batch = records.encode_batch([records.Record(0, NOW, None, b"v" * 200)], codec=GZIP)
    with pytest.raises(BatchRejected) as caught:
        check_batches("t", 0, batch, config, NOW)
    assert caught.value.code == errors.INVALID_RECORD


def test_http_records_are_never_capped() -> None:
    """The HTTP door takes records, not compressed client batches: as Kafka bounds no record of an
    uncompressed producer batch, even on a topic that compresses, nothing is refused for the cap."""
    info = TopicInfo("t", 1, {}, 0)
    config = TopicConfig.from_overrides({CAP: "100", "compression.type": "gzip"})
    request = RequestEncoder(random.Random(1)).encode(info, config, [ProduceRecord(b"k", b"v" * 500)], NOW)
    (batch,) = request.batches
    assert [r.value for r in records.decode_records(batch.data)] == [b"v" * 500]
