"""RecordBatch v2 codec: round trips, Kafka's own bytes, and malformed input giving only CodecError."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import records as records_facade
from storage.errors import CodecError
from storage.records import (
    RECORD_BATCH_OVERHEAD,
    Header,
    Record,
    count_records,
    decode_records,
    encode_batch,
    iter_batches,
    set_base_offset,
)
from storage.records import codec as record_codec
from storage.records import compiled as record_compiled
from storage.records import encode as record_encode
from storage.records import scan as record_scan
from tests.examples import examples

# Real bytes from a Kafka 0.11 broker, as kept in kafka-python's test/record/test_records.py. The third
# element is two batches back to back (the fourth carries a header).
KAFKA_BATCHES = [
    # offset 0, value "123", partitionLeaderEpoch 1
    b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00;\x00\x00\x00\x01\x02\x03"
    b"\x18\xa2p\x00\x00\x00\x00\x00\x00\x00\x00\x01]\xff{\x06<\x00\x00\x01]"
    b"\xff{\x06<\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00"
    b"\x00\x00\x01\x12\x00\x00\x00\x01\x06123\x00",
    # offsets 1 and 2, empty values, a positive timestamp delta
    b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00@\x00\x00\x00\x02\x02\xc8"
    b"\\\xbd#\x00\x00\x00\x00\x00\x01\x00\x00\x01]\xff|\xddl\x00\x00\x01]\xff"
    b"|\xde\x14\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00"
    b"\x00\x00\x02\x0c\x00\x00\x00\x01\x00\x00\x0e\x00\xd0\x02\x02\x01\x00"
    b"\x00",
    # offset 3, value "123"; then offset 0, value "hdr" with header hkey=hval
    b"\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00;\x00\x00\x00\x02\x02.\x0b"
    b"\x85\xb7\x00\x00\x00\x00\x00\x00\x00\x00\x01]\xff|\xe7\x9d\x00\x00\x01]"
    b"\xff|\xe7\x9d\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
    b"\x00\x00\x00\x01\x12\x00\x00\x00\x01\x06123\x00"
    b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00E\x00\x00\x00\x00\x02\\"
    b"\xd8\xefR\x00\x00\x00\x00\x00\x00\x00\x00\x01e\x85\xb6\xf3\xc1\x00\x00"
    b"\x01e\x85\xb6\xf3\xc1\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
    b"\xff\xff\x00\x00\x00\x01&\x00\x00\x00\x01\x06hdr\x02\x08hkey\x08hval",
]
KAFKA_BYTES = b"".join(KAFKA_BATCHES)

FAST = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- an independent encoder for hand-made (and deliberately broken) batches -------------------------------


def zz(n: int) -> bytes:
    """Zigzag varint, written from the protocol description rather than shared with the codec."""
    z = (n << 1) ^ (n >> 63) if n < 0 else n << 1
    z &= (1 << 64) - 1
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7


def raw_record(body: bytes) -> bytes:
    return zz(len(body)) + body


def raw_batch(
    records: bytes,
    *,
    count: int,
    last_offset_delta: int = 0,
    attributes: int = 0,
    base_offset: int = 0,
    base_timestamp: int = 1000,
    max_timestamp: int = 1000,
    magic: int = 2,
) -> bytes:
    covered = (
        struct.pack(
            ">hiqqqhii", attributes, last_offset_delta, base_timestamp, max_timestamp, -1, -1, -1, count
        )
        + records
    )
    return struct.pack(">qiibI", base_offset, 9 + len(covered), -1, magic, crc32c(covered)) + covered


def simple_body(offset_delta: int = 0, key: bytes = b"k", value: bytes = b"v") -> bytes:
    return b"\x00" + zz(0) + zz(offset_delta) + zz(len(key)) + key + zz(len(value)) + value + zz(0)


def decodes_or_codec_error(data: bytes, *, verify_crc: bool = True) -> list[Record] | None:
    """Decode fully; None if CodecError. Any other exception escapes and fails the test."""
    try:
        records = list(decode_records(data, verify_crc=verify_crc))
        for _ in iter_batches(data, verify_crc=verify_crc):
            pass
        count_records(data, verify_crc=verify_crc)
    except CodecError:
        return None
    return records


# --- strategies ------------------------------------------------------------------------------------------

headers_st = st.lists(
    st.builds(Header, key=st.text(max_size=8), value=st.none() | st.binary(max_size=8)),
    max_size=3,
).map(tuple)


@st.composite
def record_lists(draw: st.DrawFn) -> tuple[int, list[Record]]:
    base_offset = draw(st.integers(0, 2**50) | st.just(0))
    gaps = draw(st.lists(st.integers(1, 1000) | st.just(1), min_size=1, max_size=25))
    base_ts = draw(st.integers(-(2**50), 2**50))
    records: list[Record] = []
    offset = base_offset + draw(st.integers(0, 5))
    for gap in gaps:
        records.append(
            Record(
                offset=offset,
                timestamp=base_ts + draw(st.integers(-(2**40), 2**40)),
                key=draw(st.none() | st.binary(max_size=20)),
                value=draw(st.none() | st.binary(max_size=300)),
                headers=draw(headers_st),
            )
        )
        offset += gap
    return base_offset, records


# --- Kafka's bytes ---------------------------------------------------------------------------------------


def test_decodes_real_kafka_batches() -> None:
    records = list(decode_records(KAFKA_BYTES))
    assert records == [
        Record(0, 1503229838908, None, b"123"),
        Record(1, 1503229959532, None, b""),
        Record(2, 1503229959700, None, b""),
        Record(3, 1503229962141, None, b"123"),
        Record(0, 1535546684353, None, b"hdr", (Header("hkey", b"hval"),)),
    ]
    headers = [header for header, _ in iter_batches(KAFKA_BYTES)]
    assert [h.base_offset for h in headers] == [0, 1, 3, 0]
    assert [h.records_count for h in headers] == [1, 2, 1, 1]
    assert [h.last_offset_delta for h in headers] == [0, 1, 0, 0]
    assert [h.partition_leader_epoch for h in headers] == [1, 2, 2, 0]
    assert sum(h.size for h in headers) == len(KAFKA_BYTES)
    assert count_records(KAFKA_BYTES) == 5


def test_encoding_matches_kafka_bytes() -> None:
    # Kafka's broker set partitionLeaderEpoch to 1; Strata writes -1. Everything else, CRC included, is equal.
    ours = encode_batch([Record(0, 1503229838908, None, b"123")])
    kafka = KAFKA_BATCHES[0]
    assert ours[:12] == kafka[:12]
    assert ours[12:16] == b"\xff\xff\xff\xff"
    assert ours[16:] == kafka[16:]

    two = encode_batch([Record(1, 1503229959532, None, b""), Record(2, 1503229959700, None, b"")], 1)
    assert two[16:] == KAFKA_BATCHES[1][16:]


def test_kafka_vector_with_trailing_zero_bytes_is_rejected() -> None:
    # kafka-python tolerates this tail as an incomplete next batch; a Strata chunk must be exact.
    with pytest.raises(CodecError):
        list(decode_records(KAFKA_BYTES + b"\x00" * 4))


# --- round trips -----------------------------------------------------------------------------------------


@FAST
@given(record_lists())
def test_round_trip(case: tuple[int, list[Record]]) -> None:
    base_offset, records = case
    data = encode_batch(records, base_offset)
    assert list(decode_records(data)) == records
    ((header, view),) = list(iter_batches(data))
    assert bytes(view) == data
    assert header.size == len(data)
    assert header.base_offset == base_offset
    assert header.records_count == len(records)
    assert header.last_offset_delta == records[-1].offset - base_offset
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)
    assert (header.attributes, header.magic, header.partition_leader_epoch) == (0, 2, -1)
    assert count_records(data) == len(records)


@FAST
@given(st.lists(record_lists(), min_size=1, max_size=4), st.integers(0, 2**40))
def test_round_trip_of_concatenated_relative_batches(
    cases: list[tuple[int, list[Record]]], chunk_base: int
) -> None:
    # A Strata chunk: batches with relative base offsets, read back with the chunk's absolute base.
    expected: list[Record] = []
    parts: list[bytes] = []
    next_relative = 0
    for _, records in cases:
        shift = next_relative - records[0].offset
        relative = [Record(r.offset + shift, r.timestamp, r.key, r.value, r.headers) for r in records]
        parts.append(encode_batch(relative, relative[0].offset))
        expected.extend(
            Record(r.offset + chunk_base, r.timestamp, r.key, r.value, r.headers) for r in relative
        )
        next_relative = relative[-1].offset + 1
    data = b"".join(parts)
    assert list(decode_records(data, offset_base=chunk_base)) == expected
    assert list(decode_records(memoryview(data), offset_base=chunk_base)) == expected
    assert list(decode_records(bytearray(data), offset_base=chunk_base)) == expected
    assert count_records(data) == len(expected)
    assert [bytes(view) for _, view in iter_batches(bytearray(data))] == parts


def test_tombstone_null_key_and_null_header_value() -> None:
    records = [
        Record(0, 5, b"k", None),
        Record(1, 4, None, b"v", (Header("h", None), Header("ü", b""))),
    ]
    assert list(decode_records(encode_batch(records))) == records


def test_large_values_and_deltas_use_multibyte_varints() -> None:
    big = bytes(range(256)) * 300
    records = [
        Record(10, -(2**61), b"x" * 200, big),
        Record(10 + 2**31 - 1, 2**62, None, b"y"),
    ]
    assert list(decode_records(encode_batch(records, 10))) == records


def test_encode_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        encode_batch([])
    with pytest.raises(ValueError):
        encode_batch([Record(5, 0, None, b"")], base_offset=6)
    with pytest.raises(ValueError):
        encode_batch([Record(1, 0, None, b""), Record(1, 0, None, b"")])
    with pytest.raises(ValueError):
        encode_batch([Record(2, 0, None, b""), Record(1, 0, None, b"")])
    with pytest.raises(ValueError):
        encode_batch([Record(2**31, 0, None, b"")])
    with pytest.raises(ValueError):
        encode_batch([Record(0, 0, None, b"")], base_offset=-1)
    with pytest.raises(ValueError):
        encode_batch([Record(0, -(2**63), None, b""), Record(1, 2**63 - 1, None, b"")])


# --- set_base_offset -------------------------------------------------------------------------------------


@FAST
@given(st.lists(record_lists(), min_size=1, max_size=3), st.integers(0, 2**62))
def test_set_base_offset_keeps_crc_valid(cases: list[tuple[int, list[Record]]], new_base: int) -> None:
    buf = bytearray(b"".join(encode_batch(records, base) for base, records in cases))
    positions: list[int] = []
    position = 0
    for header, _ in iter_batches(buf):
        positions.append(position)
        position += header.size
    for i, position in enumerate(positions):
        set_base_offset(buf, position, new_base + i)
    headers = [header for header, _ in iter_batches(buf, verify_crc=True)]
    assert [h.base_offset for h in headers] == [new_base + i for i in range(len(cases))]
    decoded = list(decode_records(buf))
    expected = [r.offset - base + new_base + i for i, (base, records) in enumerate(cases) for r in records]
    assert [r.offset for r in decoded] == expected


def test_set_base_offset_rejects_non_batch_positions() -> None:
    buf = bytearray(encode_batch([Record(0, 0, None, b"v")]))
    with pytest.raises(CodecError):
        set_base_offset(buf, 1, 7)  # magic byte is not where a batch would put it
    with pytest.raises(CodecError):
        set_base_offset(buf, len(buf) - 10, 7)
    with pytest.raises(ValueError):
        set_base_offset(buf, -1, 7)
    with pytest.raises(ValueError):
        set_base_offset(buf, 0, -1)


# --- malformed input: only CodecError --------------------------------------------------------------------


@FAST
@given(st.binary(max_size=300), st.booleans())
def test_random_bytes_raise_only_codec_error(data: bytes, verify_crc: bool) -> None:
    decodes_or_codec_error(data, verify_crc=verify_crc)


@FAST
@given(record_lists(), st.data())
def test_truncation_always_raises(case: tuple[int, list[Record]], data: st.DataObject) -> None:
    base, records = case
    encoded = encode_batch(records, base)
    cut = data.draw(st.integers(1, len(encoded) - 1))
    for verify_crc in (True, False):
        assert decodes_or_codec_error(encoded[:cut], verify_crc=verify_crc) is None
        assert decodes_or_codec_error(encoded[cut:], verify_crc=verify_crc) is None


@FAST
@given(record_lists(), st.data())
def test_bit_flips_outside_crc_free_fields_are_detected(
    case: tuple[int, list[Record]], data: st.DataObject
) -> None:
    base, records = case
    encoded = bytearray(encode_batch(records, base))
    position = data.draw(st.integers(0, len(encoded) - 1))
    encoded[position] ^= 1 << data.draw(st.integers(0, 7))
    flipped = bytes(encoded)
    result = decodes_or_codec_error(flipped)
    if position < 8 or 12 <= position < 16:
        # baseOffset and partitionLeaderEpoch are outside the CRC by design.
        assert result is not None
    else:
        assert result is None
    # Without the CRC the structural checks alone must still never raise anything else.
    decodes_or_codec_error(flipped, verify_crc=False)


@FAST
@given(record_lists(), st.data())
def test_corrupt_records_with_a_valid_crc_raise_only_codec_error(
    case: tuple[int, list[Record]], data: st.DataObject
) -> None:
    # Corruption that also fixed up the CRC reaches the record parser: it must fail cleanly or decode.
    base, records = case
    encoded = bytearray(encode_batch(records, base))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(RECORD_BATCH_OVERHEAD - 4, len(encoded) - 1))
        encoded[position] = data.draw(st.integers(0, 255))
    struct.pack_into(">I", encoded, 17, crc32c(memoryview(encoded)[21:]))
    decodes_or_codec_error(bytes(encoded))


def test_bad_magic() -> None:
    batch = raw_batch(raw_record(simple_body()), count=1, magic=1)
    with pytest.raises(CodecError, match="magic"):
        list(decode_records(batch))


def test_bad_crc() -> None:
    batch = bytearray(raw_batch(raw_record(simple_body()), count=1))
    batch[-2] ^= 0xFF  # the value byte: still well-formed, so only the CRC can tell
    with pytest.raises(CodecError, match="CRC"):
        list(decode_records(batch))
    assert len(list(decode_records(batch, verify_crc=False))) == 1


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_undefined_codecs_are_refused(codec: int) -> None:
    batch = raw_batch(raw_record(simple_body()), count=1, attributes=codec)
    with pytest.raises(CodecError, match="unknown compression codec"):
        list(decode_records(batch))
    with pytest.raises(CodecError):
        count_records(batch)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_uncompressed_records_labelled_compressed_are_corrupt(codec: int) -> None:
    # The header alone is fine (count_records reads only headers); the records are not the codec's stream.
    batch = raw_batch(raw_record(simple_body()) * 20, count=20, last_offset_delta=19, attributes=codec)
    assert count_records(batch) == 20
    with pytest.raises(CodecError):
        list(decode_records(batch))


def test_control_batches_are_unsupported() -> None:
    batch = raw_batch(raw_record(simple_body()), count=1, attributes=0x20)
    with pytest.raises(CodecError, match="control"):
        list(decode_records(batch))


def test_log_append_time_batches_use_max_timestamp() -> None:
    body = raw_record(simple_body(0)) + raw_record(simple_body(1))
    batch = raw_batch(body, count=2, last_offset_delta=1, attributes=0x08, base_timestamp=5, max_timestamp=99)
    assert [r.timestamp for r in decode_records(batch)] == [99, 99]


@pytest.mark.parametrize(
    ("count", "last_offset_delta"),
    [(2, 1), (0, 0), (3, 2)],
    ids=["count-too-high", "count-zero-with-records", "count-far-too-high"],
)
def test_record_count_mismatch(count: int, last_offset_delta: int) -> None:
    batch = raw_batch(raw_record(simple_body()), count=count, last_offset_delta=last_offset_delta)
    with pytest.raises(CodecError):
        list(decode_records(batch))


def test_record_count_lower_than_records_present() -> None:
    body = raw_record(simple_body(0)) + raw_record(simple_body(1))
    batch = raw_batch(body, count=1, last_offset_delta=1)
    with pytest.raises(CodecError, match="left after"):
        list(decode_records(batch))


def test_empty_batch_decodes_to_nothing() -> None:
    # Kafka's cleaner may leave a batch with no records; it is structurally valid.
    assert list(decode_records(raw_batch(b"", count=0))) == []


def test_invalid_utf8_header_key() -> None:
    body = b"\x00" + zz(0) + zz(0) + zz(-1) + zz(1) + b"v" + zz(1) + zz(2) + b"\xff\xfe" + zz(-1)
    with pytest.raises(CodecError, match="utf-8"):
        list(decode_records(raw_batch(raw_record(body), count=1)))


@pytest.mark.parametrize(
    "body",
    [
        b"\x00" + zz(0) + zz(0) + zz(-2) + zz(0) + zz(0),  # key length -2
        b"\x00" + zz(0) + zz(0) + zz(50) + b"k" + zz(0) + zz(0),  # key past the record
        b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-3) + zz(0),  # value length -3
        b"\x00" + zz(0) + zz(0) + zz(-1) + zz(90) + b"v" + zz(0),  # value past the record
        b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(-1),  # negative header count
        b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(1000),  # header count past the record
        b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(1) + zz(-1) + zz(-1),  # null header key
        b"\x00" + b"\xff" * 11 + b"\x01" + zz(0) + zz(-1) + zz(-1) + zz(0),  # varlong of 12 bytes
        b"\x00" + zz(0) + b"\xff\xff\xff\xff\xff\x01" + zz(-1) + zz(-1) + zz(0),  # 6-byte varint
        b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(0) + b"extra",  # bytes after the headers
    ],
    ids=[
        "negative-key-length",
        "key-past-record",
        "negative-value-length",
        "value-past-record",
        "negative-header-count",
        "header-count-too-large",
        "null-header-key",
        "varlong-too-long",
        "varint-too-long",
        "record-length-mismatch",
    ],
)
def test_malformed_records(body: bytes) -> None:
    with pytest.raises(CodecError):
        list(decode_records(raw_batch(raw_record(body), count=1)))


def test_record_length_past_the_batch() -> None:
    record = zz(200) + simple_body()
    with pytest.raises(CodecError):
        list(decode_records(raw_batch(record, count=1)))


def test_offset_deltas_must_increase_within_last_offset_delta() -> None:
    body = raw_record(simple_body(1)) + raw_record(simple_body(1))
    with pytest.raises(CodecError, match="offset delta"):
        list(decode_records(raw_batch(body, count=2, last_offset_delta=1)))
    with pytest.raises(CodecError, match="offset delta"):
        list(decode_records(raw_batch(raw_record(simple_body(3)), count=1, last_offset_delta=2)))


def test_gaps_within_last_offset_delta_are_allowed() -> None:
    # Kafka's cleaner keeps lastOffsetDelta when it drops the last record, so it may exceed the last delta.
    body = raw_record(simple_body(0)) + raw_record(simple_body(4))
    records = list(decode_records(raw_batch(body, count=2, last_offset_delta=9, base_offset=100)))
    assert [r.offset for r in records] == [100, 104]


@pytest.mark.parametrize(
    "data",
    [
        b"\x00" * 11,  # shorter than the offset and length prefix
        b"\x00" * (RECORD_BATCH_OVERHEAD - 1),  # shorter than a batch header
        struct.pack(">qi", 0, 10) + b"\x00" * 49,  # batchLength below the minimum
        struct.pack(">qi", 0, 1000) + b"\x00\x00\x00\x00\x02" + b"\x00" * 44,  # batchLength past the end
        struct.pack(">qi", 0, -5) + b"\x00" * 49,  # negative batchLength
    ],
    ids=["tiny", "short-header", "length-too-small", "length-past-end", "negative-length"],
)
def test_malformed_batch_framing(data: bytes) -> None:
    assert decodes_or_codec_error(data) is None
    assert decodes_or_codec_error(data, verify_crc=False) is None


def test_trailing_garbage_after_a_valid_batch() -> None:
    batch = encode_batch([Record(0, 0, b"k", b"v")])
    with pytest.raises(CodecError, match="trailing"):
        list(decode_records(batch + b"\x00" * 20))
    with pytest.raises(CodecError):
        list(iter_batches(batch + b"\x01"))


def test_records_facade_is_the_codec_and_the_scan_helpers() -> None:
    # Callers import only storage.records: every public name of the modules must be there, as itself,
    # except the pure-Python references, which only the tests and benchmarks use.
    parts = {
        n: module
        for module in (record_codec, record_encode, record_scan, record_compiled)
        for n in module.__all__
        if not n.endswith("_reference")
    }
    assert sorted(records_facade.__all__) == sorted(parts)
    for name, module in parts.items():
        assert getattr(records_facade, name) is getattr(module, name), name
