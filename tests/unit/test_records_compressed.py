"""Compressed RecordBatches: every reader of the codec (decode, scan, filter, framing check) against the
uncompressed form of the same records, batches built by kafka-python's own builder, and garbage."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from storage.errors import CodecError
from storage.records import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Header,
    Record,
    check_framing,
    compression,
    count_records,
    decode_records,
    encode_batch,
    filter_batch,
    iter_batches,
    recompress_batch,
)
from storage.records.scan import scan_batch_reference
from tests.examples import examples

CODECS = [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]
FAST = settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])

_records = st.lists(
    st.tuples(
        st.integers(1, 3),  # offset gap
        st.integers(-(10**6), 10**6),  # timestamp jitter
        st.one_of(st.none(), st.binary(max_size=8)),
        st.one_of(st.none(), st.binary(max_size=60), st.just(b"x" * 5000)),
        st.lists(st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=4))), max_size=2),
    ),
    min_size=1,
    max_size=30,
)


Spec = list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]


def _build(spec: Spec) -> list[Record]:
    out, offset = [], -1
    for gap, jitter, key, value, headers in spec:
        offset += gap
        out.append(
            Record(offset, 1_700_000_000_000 + jitter, key, value, tuple(Header(k, v) for k, v in headers))
        )
    return out


def _one(batch: bytes) -> tuple[BatchHeader, bytes]:
    ((header, view),) = list(iter_batches(batch))
    return header, bytes(view)


@FAST
@given(st.sampled_from(CODECS), _records, st.integers(0, 10**6))
def test_a_compressed_batch_reads_as_the_uncompressed_one(codec: int, spec: Spec, offset_base: int) -> None:
    records = _build(spec)
    plain = encode_batch(records)
    packed = encode_batch(records, codec=codec)
    header, _ = _one(packed)
    assert header.attributes & 0x07 == codec
    assert count_records(packed) == len(records)
    expected = list(decode_records(plain, offset_base=offset_base))
    assert list(decode_records(packed, offset_base=offset_base)) == expected
    assert list(decode_records(plain + packed + plain)) == list(decode_records(plain)) * 3
    check_framing(packed, header)
    # Compaction's scan sees the same offsets, timestamps, keys and tombstones.
    plain_header, plain_batch = _one(plain)
    summary = [
        (s.offset, s.timestamp, s.key, s.tombstone) for s in scan_batch_reference(plain_batch, plain_header)
    ]
    assert [
        (s.offset, s.timestamp, s.key, s.tombstone) for s in scan_batch_reference(packed, header)
    ] == summary


@FAST
@given(st.sampled_from(CODECS), _records, st.data())
def test_filter_keeps_the_codec_and_exactly_the_chosen_records(
    codec: int,
    spec: Spec,
    data: st.DataObject,
) -> None:
    records = _build(spec)
    header, batch = _one(encode_batch(records, codec=codec))
    spans = scan_batch_reference(batch, header)
    keep = data.draw(st.lists(st.booleans(), min_size=len(spans), max_size=len(spans)))
    kept = [s for s, k in zip(spans, keep, strict=True) if k] or spans[:1]
    horizon = data.draw(st.one_of(st.none(), st.integers(0, 10**13)))
    base = data.draw(st.integers(0, 1000))
    out = filter_batch(batch, header, kept, offset_base=0, base_offset=base, delete_horizon_ms=horizon)
    out_header, _ = _one(out)
    assert out_header.attributes & 0x07 == codec  # as Kafka's cleaner: the retained batch keeps its codec
    assert out_header.base_offset == base
    assert out_header.last_offset_delta == header.last_offset_delta
    wanted = {s.offset for s in kept}
    assert list(decode_records(out, offset_base=-base)) == [r for r in records if r.offset in wanted]
    if horizon is None and len(kept) == len(spans):
        assert out[RECORD_BATCH_OVERHEAD:] == batch[RECORD_BATCH_OVERHEAD:]  # copied as stored


@FAST
@given(st.sampled_from([0, *CODECS]), st.sampled_from([0, *CODECS]), _records)
def test_recompress_changes_only_the_codec(source: int, target: int, spec: Spec) -> None:
    records = _build(spec)
    header, batch = _one(encode_batch(records, codec=source))
    out = recompress_batch(batch, header, target)
    out_header, _ = _one(out)  # iter_batches checks the new CRC
    assert out_header.attributes == (header.attributes & ~0x07) | target
    for field in ("base_offset", "last_offset_delta", "base_timestamp", "max_timestamp", "records_count"):
        assert getattr(out_header, field) == getattr(header, field)
    assert list(decode_records(out)) == records


@pytest.mark.parametrize("codec", CODECS)
def test_batches_built_by_kafka_python(codec: int) -> None:
    # An independent encoder: kafka-python's producer builds batches this way (its own codec module).
    builder = DefaultRecordBatchBuilder(2, codec, False, 4242, 3, 17, 1 << 20)
    expected = []
    for i in range(300):
        key = None if i % 7 == 0 else f"k{i}".encode()
        value = None if i % 11 == 0 else f"value {i} ".encode() * (i % 5)
        headers = [("h", f"{i}".encode())] if i % 3 == 0 else []
        builder.append(i, 1_700_000_000_000 + i, key, value, headers)
        expected.append(Record(i, 1_700_000_000_000 + i, key, value, tuple(Header(k, v) for k, v in headers)))
    batch = bytes(builder.build())
    header, _ = _one(batch)
    assert header.attributes & 0x07 == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4242, 3, 17)
    assert list(decode_records(batch, offset_base=1000)) == [
        Record(r.offset + 1000, r.timestamp, r.key, r.value, r.headers) for r in expected
    ]
    # Re-compressed with another codec, the producer's fields survive (idempotence reads them).
    other = recompress_batch(
        batch, header, compression.ZSTD if codec != compression.ZSTD else compression.LZ4
    )
    other_header, _ = _one(other)
    assert (other_header.producer_id, other_header.producer_epoch, other_header.base_sequence) == (
        4242,
        3,
        17,
    )
    assert list(decode_records(other)) == expected


# --- malformed compressed batches --------------------------------------------------------------------------


def _raw_batch(stored_records: bytes, *, count: int, attributes: int) -> bytes:
    """A batch around ``stored_records`` (already in the codec's stream), with a valid CRC."""
    covered = (
        struct.pack(">hiqqqhii", attributes, max(count - 1, 0), 1000, 1000, -1, -1, -1, count)
        + stored_records
    )
    return struct.pack(">qiibI", 0, 9 + len(covered), -1, 2, crc32c(covered)) + covered


def _every_reader(batch: bytes) -> None:
    """Run every reader of one batch; CodecError is the only exception allowed to escape."""
    for reader in (
        lambda: list(decode_records(batch)),
        lambda: scan_batch_reference(batch, _one(batch)[0]),
        lambda: check_framing(batch, _one(batch)[0]),
    ):
        try:
            reader()
        except CodecError:
            pass


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(CODECS), st.binary(max_size=200), st.integers(0, 40))
def test_garbage_records_sections_give_only_codec_error(codec: int, garbage: bytes, count: int) -> None:
    _every_reader(_raw_batch(garbage, count=count, attributes=codec))
    # The codec's valid stream of garbage: decompresses fine, then the records do not parse.
    _every_reader(_raw_batch(compression.compress(codec, garbage), count=count, attributes=codec))


@pytest.mark.parametrize("codec", CODECS)
def test_record_count_must_match_the_decompressed_records(codec: int) -> None:
    plain = encode_batch([Record(i, 5, b"k", b"v") for i in range(3)])
    section = plain[RECORD_BATCH_OVERHEAD:]
    good = _raw_batch(compression.compress(codec, section), count=3, attributes=codec)
    check_framing(good, _one(good)[0])
    assert len(list(decode_records(good))) == 3
    for count, section_bytes in ((2, section), (4, section), (3, section[:-1]), (3, section + b"\x00")):
        bad = _raw_batch(compression.compress(codec, section_bytes), count=count, attributes=codec)
        header = _one(bad)[0]
        with pytest.raises(CodecError):
            check_framing(bad, header)
        with pytest.raises(CodecError):
            list(decode_records(bad))
        with pytest.raises(CodecError):
            scan_batch_reference(bad, header)


@pytest.mark.parametrize("codec", CODECS)
def test_a_bomb_in_a_batch_is_a_codec_error(codec: int) -> None:
    # 64 MiB + 1 of zeros decompresses past output_limit of its small compressed size (the 64 MiB floor).
    section = compression.compress(codec, bytes((64 << 20) + 1))
    assert compression.output_limit(len(section)) == 64 << 20
    bomb = _raw_batch(section, count=1, attributes=codec)
    header = _one(bomb)[0]
    for reader in (lambda: list(decode_records(bomb)), lambda: scan_batch_reference(bomb, header)):
        with pytest.raises(CodecError, match="more than 67108864 bytes"):
            reader()
    with pytest.raises(CodecError, match="more than 67108864 bytes"):
        check_framing(bomb, header)


def test_encode_refuses_unknown_codecs() -> None:
    with pytest.raises(ValueError, match="unknown compression codec"):
        encode_batch([Record(0, 0, None, b"v")], codec=5)
    header, batch = _one(encode_batch([Record(0, 0, None, b"v")]))
    with pytest.raises(ValueError, match="unknown compression codec"):
        recompress_batch(batch, header, 7)
