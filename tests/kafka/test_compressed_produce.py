"""Compressed batches over the Kafka door, frame by frame: stored as sent or re-compressed per the topic's
``compression.type``, refused with Kafka's codes when they are bombs, corrupt or keyless on a compacted
topic, and never stored then."""

from __future__ import annotations

import pytest
from crc32c import crc32c
from kafka.protocol.producer.produce import ProduceResponse

from broker import errors
from storage import records
from storage.records import compression
from storage.records.compression import GZIP, LZ4, SNAPPY, ZSTD
from tests.fixtures.kafka import RunningBroker
from tests.kafka.compressed import stored_batches
from tests.kafka.test_protocol import create, partition_results, produce
from tests.kafka.wire import Wire

pytestmark = pytest.mark.integration

CODECS = [GZIP, SNAPPY, LZ4, ZSTD]
NOW = 1_700_000_000_000


def sample(n: int = 50, key: bool = True) -> list[records.Record]:
    return [
        records.Record(i, NOW + i, f"k{i % 7}".encode() if key else None, f"value {i} ".encode() * 20)
        for i in range(n)
    ]


def without_base(batch: bytes) -> bytes:
    return batch[8:]  # baseOffset is patched at commit; every other byte is stored as sent


def test_compressed_batches_are_stored_as_sent_by_default(broker: RunningBroker) -> None:
    create(broker, "as-sent", 4)
    sent = {p: records.encode_batch(sample(), codec=codec) for p, codec in enumerate(CODECS)}
    with Wire(broker.port) as wire:
        results = partition_results(wire.call(produce("as-sent", sent), ProduceResponse))
    assert results == {p: (errors.NONE, 0) for p in range(4)}
    for p, batch in sent.items():
        ((_, stored),) = stored_batches(broker.runtime, "as-sent", p)
        assert without_base(stored) == without_base(batch)


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_compression_type_recompresses_other_codecs(broker: RunningBroker, target: str) -> None:
    codec = {"uncompressed": 0, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}[target]
    create(broker, "typed", 5, **{"compression.type": target})
    sent = {p: records.encode_batch(sample(), codec=source) for p, source in enumerate([0, *CODECS])}
    with Wire(broker.port) as wire:
        results = partition_results(wire.call(produce("typed", sent), ProduceResponse))
    assert results == {p: (errors.NONE, 0) for p in range(5)}
    for p, batch in sent.items():
        ((header, stored),) = stored_batches(broker.runtime, "typed", p)
        assert header.attributes & 0x07 == codec
        if p == [0, *CODECS].index(codec):
            assert without_base(stored) == without_base(batch)  # already in the topic's codec: as sent
        assert list(records.decode_records(stored)) == sample()


def test_bad_compressed_batches_get_kafka_codes_and_store_nothing(broker: RunningBroker) -> None:
    create(broker, "bad-z", 4)
    create(broker, "compact-z", 1, **{"cleanup.policy": "compact"})
    create(broker, "small-z", 1, **{"compression.type": "uncompressed", "max.message.bytes": "2000"})
    bomb = records.encode_batch([records.Record(0, NOW, b"k", bytes((64 << 20) + 1))], codec=ZSTD)
    assert len(bomb) < 10_000
    plain = records.encode_batch(sample(3))
    lying = records.encode_batch(sample(3), codec=GZIP)
    with Wire(broker.port) as wire:
        results = partition_results(
            wire.call(
                produce(
                    "bad-z",
                    {
                        0: bomb,
                        1: _relabel(plain, LZ4),  # records not in lz4's stream, CRC valid
                        2: _recount(lying, 4),  # 3 records inside, 4 declared
                        3: records.encode_batch(sample(3), codec=SNAPPY),
                    },
                ),
                ProduceResponse,
            )
        )
        assert results[0][0] == errors.CORRUPT_MESSAGE
        assert results[1][0] == errors.CORRUPT_MESSAGE
        # Records that do not match their count are the client's records: INVALID_RECORD, as Kafka's
        # "Incorrect declared batch size" (a stream that does not decompress is CORRUPT_MESSAGE).
        assert results[2][0] == errors.INVALID_RECORD
        assert results[3] == (errors.NONE, 0)
        keyless = records.encode_batch(sample(5, key=False), codec=LZ4)
        response = wire.call(produce("compact-z", {0: keyless}), ProduceResponse, 2)
        assert partition_results(response)[0][0] == errors.INVALID_RECORD
        keyed = records.encode_batch(sample(5), codec=LZ4)
        response = wire.call(produce("compact-z", {0: keyed}), ProduceResponse, 3)
        assert partition_results(response)[0] == (errors.NONE, 0)
        # 1.5 KiB as zstd, but over max.message.bytes once stored uncompressed, as the topic asks.
        squeezed = records.encode_batch(sample(20), codec=ZSTD)
        assert len(squeezed) < 2000 < len(records.encode_batch(sample(20)))
        response = wire.call(produce("small-z", {0: squeezed}), ProduceResponse, 4)
        assert partition_results(response)[0][0] == errors.MESSAGE_TOO_LARGE
    meta = broker.runtime.metadata
    assert [meta.partition_state("bad-z", p).high_watermark for p in range(4)] == [0, 0, 0, 3]
    assert meta.partition_state("compact-z", 0).high_watermark == 5
    assert meta.partition_state("small-z", 0).high_watermark == 0


def _relabel(batch: bytes, codec: int) -> bytes:
    """``batch`` with the codec bits set but its records left as they are, and a CRC that matches."""
    covered = bytearray(batch[21:])
    covered[1] = (covered[1] & ~0x07) | codec
    return _with_crc(batch[:21], bytes(covered))


def _recount(batch: bytes, count: int) -> bytes:
    """``batch`` claiming ``count`` records (and a lastOffsetDelta to match), with a CRC that matches."""
    covered = bytearray(batch[21:])
    covered[2:6] = (count - 1).to_bytes(4, "big")
    covered[36:40] = count.to_bytes(4, "big")
    return _with_crc(batch[:21], bytes(covered))


def _with_crc(prefix: bytes, covered: bytes) -> bytes:
    return prefix[:17] + crc32c(covered).to_bytes(4, "big") + covered


def test_codec_ids_five_to_seven_are_unsupported(broker: RunningBroker) -> None:
    create(broker, "odd", 3)
    plain = records.encode_batch(sample(2))
    with Wire(broker.port) as wire:
        results = partition_results(
            wire.call(produce("odd", {p: _relabel(plain, 5 + p) for p in range(3)}), ProduceResponse)
        )
    assert {code for code, _ in results.values()} == {errors.UNSUPPORTED_COMPRESSION_TYPE}
    assert compression.CODEC_NAMES.keys() == {0, 1, 2, 3, 4}
