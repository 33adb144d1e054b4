"""The compiled codec (storage/records/compiled.py) against the pure-Python reference.

Encode gives the same bytes; decode gives the same records, and compaction's C column scan
(storage/records/columns.py) the same spans as the reference scan; every malformed
input gives the same error with the same message. Batches are built valid, then broken at the field level
in the ways where aiokafka's reader is more lenient than the reference (negative lengths other than -1,
longer varints, record attributes that are not a one-byte varint, varlongs past 64 bits), and at random.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.errors import CodecError
from storage.records import (
    RECORD_BATCH_OVERHEAD,
    Header,
    Record,
    compression,
    decode_records,
    encode_batch,
    iter_batches,
    recompress_batch,
)
from storage.records import compiled as record_compiled
from storage.records.codec import BatchHeader, read_header
from storage.records.columns import scan_columns, siphash24
from storage.records.decode import decode_records_reference
from storage.records.encode import encode_batch_reference
from storage.records.scan import RecordSpan, scan_batch_reference
from tests.examples import examples

CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]
FAST = settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
MANY = settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])

_Outcome = tuple[str, object]
_EXPECTED_ERRORS = (CodecError, ValueError, TypeError, AttributeError)


def outcome(run: Callable[[], object]) -> _Outcome:
    """What ``run`` returns, or its error's type and message; any other exception fails the test."""
    try:
        return ("ok", run())
    except _EXPECTED_ERRORS as exc:
        return (type(exc).__name__, str(exc))


def same_decode(data: bytes, *, offset_base: int = 0, verify_crc: bool = True) -> _Outcome:
    compiled = outcome(lambda: list(decode_records(data, offset_base=offset_base, verify_crc=verify_crc)))
    reference = outcome(
        lambda: list(decode_records_reference(data, offset_base=offset_base, verify_crc=verify_crc))
    )
    assert compiled == reference
    return compiled


def same_scan(batch: bytes, offset_base: int = 0) -> _Outcome | None:
    """Scan outcomes of a one-batch buffer whose header reads (None when it does not).

    Compaction's column scan (``storage/_keyscan.c``) must match the reference.
    """
    try:
        header = read_header(batch, 0, False)
    except CodecError:
        return None
    reference = outcome(lambda: scan_batch_reference(batch, header, offset_base))
    columns = outcome(lambda: column_rows(batch, header, offset_base))
    assert columns == expected_rows(reference), (columns, reference)
    return reference


_KEY_A, _KEY_B = bytes(range(16)), bytes(range(16, 32))


def key_hash(key: bytes) -> bytes:
    return siphash24(_KEY_A, key).to_bytes(8, "little") + siphash24(_KEY_B, key).to_bytes(8, "little")


_INT64 = range(-(2**63), 2**63)


def column_rows(batch: bytes, header: BatchHeader, offset_base: int) -> list[tuple[object, ...]]:
    """``scan_columns``' answer as one row per record: offset, timestamp, key hash, tombstone, span."""
    cols = scan_columns(batch, header, offset_base, _KEY_A, _KEY_B)
    hashes = [
        (int(a).to_bytes(8, "little") + int(b).to_bytes(8, "little")) if keyed else None
        for a, b, keyed in zip(cols.h1, cols.h2, cols.keyed, strict=True)
    ]
    return list(
        zip(
            cols.offsets.tolist(),
            cols.timestamps.tolist(),
            hashes,
            cols.tombstone.tolist(),
            cols.starts.tolist(),
            cols.ends.tolist(),
            strict=True,
        )
    )


def expected_rows(reference: _Outcome) -> _Outcome:
    """What ``column_rows`` must give for the reference scan's outcome: its spans with keys hashed, or its
    error; a record whose offset or timestamp needs more than 64 bits is the column scan's own refusal."""
    kind, value = reference
    if kind != "ok":
        return reference
    assert isinstance(value, list)
    spans: list[RecordSpan] = value
    for span in spans:
        if span.timestamp not in _INT64:
            return ("CodecError", "record timestamp is outside 64 bits")
        if span.offset not in _INT64:
            return ("CodecError", "record offset is outside 64 bits")
    return (
        "ok",
        [
            (s.offset, s.timestamp, None if s.key is None else key_hash(s.key), s.tombstone, s.start, s.end)
            for s in spans
        ],
    )


def same_encode(records: list[Record], base_offset: int = 0, **options: int | None) -> _Outcome:
    compiled = outcome(lambda: encode_batch(records, base_offset, **options))  # type: ignore[arg-type]
    reference = outcome(lambda: encode_batch_reference(records, base_offset, **options))  # type: ignore[arg-type]
    assert compiled == reference
    return compiled


# --- building batches by hand -----------------------------------------------------------------------------


def uvarint(n: int, extra: int = 0) -> bytes:
    """Base-128 varint of the unsigned ``n``, with ``extra`` redundant zero groups (a longer encoding)."""
    groups = []
    while True:
        groups.append(n & 0x7F)
        n >>= 7
        if not n:
            break
    groups += [0] * extra
    return bytes([g | 0x80 for g in groups[:-1]] + [groups[-1]])


def zz(n: int, extra: int = 0) -> bytes:
    """Zigzag varint of a signed 64-bit ``n``."""
    return uvarint(((n << 1) ^ (n >> 63)) & ((1 << 64) - 1), extra)


def raw_batch(
    records: bytes,
    *,
    count: int,
    last_offset_delta: int,
    attributes: int = 0,
    base_offset: int = 0,
    base_timestamp: int = 1_700_000_000_000,
    max_timestamp: int = 1_700_000_000_000,
) -> bytes:
    """A batch around ``records`` (stored as given, so compressed if ``attributes`` says so), valid CRC."""
    covered = (
        struct.pack(
            ">hiqqqhii", attributes, last_offset_delta, base_timestamp, max_timestamp, -1, -1, -1, count
        )
        + records
    )
    return struct.pack(">qiibI", base_offset, 9 + len(covered), -1, 2, crc32c(covered)) + covered


def with_attributes(batch: bytes, attributes: int) -> bytes:
    """``batch`` (uncompressed, one batch) with other attributes and its CRC computed again."""
    out = bytearray(batch)
    struct.pack_into(">h", out, 21, attributes)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


# --- strategies -------------------------------------------------------------------------------------------

_headers = st.lists(
    st.builds(Header, key=st.text(max_size=6), value=st.none() | st.binary(max_size=6)), max_size=3
).map(tuple)


@st.composite
def valid_records(draw: st.DrawFn) -> tuple[int, list[Record]]:
    base_offset = draw(st.integers(0, 2**40) | st.just(0))
    first_timestamp = draw(
        st.integers(-(2**50), 2**50) | st.sampled_from([0, 1_700_000_000_000, -(2**62), 2**62 - 1])
    )
    dense = draw(st.booleans())
    records: list[Record] = []
    offset = base_offset + draw(st.integers(0, 3))
    for i in range(draw(st.integers(1, 25))):
        timestamp = first_timestamp if i == 0 else first_timestamp + draw(st.integers(-(2**40), 2**40))
        records.append(
            Record(
                offset,
                timestamp,
                draw(st.none() | st.binary(max_size=12)),
                draw(st.none() | st.binary(max_size=200) | st.just(b"v" * 3000)),
                draw(_headers | st.just(())),
            )
        )
        offset += 1 if dense else draw(st.integers(1, 500))
    return base_offset, records


_wild_timestamp = st.integers(-(2**63), 2**63 - 1) | st.sampled_from(
    [-1, 0, -(2**63), 2**63 - 1, 2**63, -(2**63) - 1, 2**64]
)


@st.composite
def wild_records(draw: st.DrawFn) -> tuple[int, list[Record]]:
    """Record lists that often break a rule of encode_batch (order, ranges, a first timestamp of -1)."""
    base_offset = draw(st.integers(-2, 2**63) | st.just(0))
    records = [
        Record(
            draw(st.integers(base_offset - 2, base_offset + 2**31 + 2) | st.integers(0, 40)),
            draw(_wild_timestamp),
            draw(st.none() | st.binary(max_size=4)),
            draw(st.none() | st.binary(max_size=8)),
            draw(_headers | st.just(())),
        )
        for _ in range(draw(st.integers(0, 6)))
    ]
    return base_offset, records


# Field encodings: mostly the canonical one (so that a record is often odd in one field only), else the
# odd ones the two readers treat differently.
_lengths = st.sampled_from([*range(-1, 9)] * 3 + [-2, -3, -64, -65, -(2**31), 2**31, 2**62, 5000])
_extra = st.sampled_from([0] * 12 + [1, 4, 6, 9])
# Varlongs of 10 bytes whose bits past the 64th are set: the reader drops them (leaving a value whose
# shortest form is 10 bytes too), the reference refuses them.
_PAST_64_BITS = [2**64 + 2**63 + 4, 2**70 - 1, 2**64 - 1 + 2**69]


@st.composite
def odd_record(draw: st.DrawFn, offset_delta: int) -> bytes:
    def length_and_bytes(length: int) -> bytes:
        present = max(0, min(length, 8))
        return zz(length, draw(_extra)) + draw(st.binary(min_size=present, max_size=present))

    attributes = draw(st.sampled_from([b"\x00"] * 6 + [b"\x05", b"\x80\x00", b"\xff"]))
    timestamp = draw(
        st.builds(zz, st.integers(-(2**40), 2**40), _extra)
        | st.sampled_from([zz(0), zz(5), zz(-7), zz(2**62), zz(-(2**62) - 1), zz(2**62 - 1), zz(-(2**62))])
        | st.builds(uvarint, st.sampled_from([2**64, 2**69, *_PAST_64_BITS]))
    )
    offset = zz(offset_delta, draw(_extra))
    key = length_and_bytes(draw(_lengths))
    value = length_and_bytes(draw(_lengths))
    headers = b""
    count = draw(st.sampled_from([0, 0, 0, 1, 1, 2, -1, 1000]))
    headers += zz(count, draw(_extra))
    for _ in range(max(0, min(count, 2))):
        header_key = draw(st.sampled_from([b"h", b"\xff\xfe", b""]))
        headers += zz(len(header_key), draw(_extra)) + header_key
        headers += length_and_bytes(draw(_lengths))
    body = attributes + timestamp + offset + key + value + headers
    length = len(body) + draw(st.sampled_from([0] * 8 + [-1, 1, 20]))
    return zz(length, draw(_extra)) + body


@st.composite
def odd_batches(draw: st.DrawFn) -> bytes:
    deltas = draw(st.lists(st.integers(0, 6) | st.just(-1), min_size=0, max_size=5))
    if draw(st.sampled_from([True, True, True, False])):
        deltas = sorted(set(deltas))  # mostly in order, so that the records themselves are reached
    records = b"".join(draw(odd_record(delta)) for delta in deltas)
    count = len(deltas) + draw(st.sampled_from([0, 0, 0, 1, -1]))
    return raw_batch(
        records,
        count=max(count, 0),
        last_offset_delta=max(deltas, default=0) + draw(st.sampled_from([0, 0, 1, -1])),
        attributes=draw(st.sampled_from([0, 0, 0x08, 0x40])),
        base_offset=draw(st.sampled_from([0, 7, 2**63 - 3, -5])),
        base_timestamp=draw(st.sampled_from([1_700_000_000_000, 2**63 - 1, -(2**63), -1])),
    )


# --- encode -----------------------------------------------------------------------------------------------


@FAST
@given(valid_records(), st.sampled_from(CODECS), st.data())
def test_encode_gives_the_reference_bytes(
    case: tuple[int, list[Record]], codec: int, data: st.DataObject
) -> None:
    base_offset, records = case
    span = records[-1].offset - base_offset
    last_offset_delta = data.draw(st.none() | st.integers(span, span + 10) | st.just(span - 1))
    horizon = data.draw(st.none() | st.integers(0, 2**45))
    append_time = data.draw(st.none() | st.integers(0, 2**45))
    kind, _ = same_encode(
        records,
        base_offset,
        codec=codec,
        last_offset_delta=last_offset_delta,
        delete_horizon_ms=horizon,
        log_append_time=append_time,
    )
    assert kind == ("ValueError" if last_offset_delta is not None and last_offset_delta < span else "ok")
    if horizon is None and records[0].timestamp != -1:
        # The compiled builder wrote it (not the reference behind it).
        assert record_compiled._write(records, base_offset) is not None


@MANY
@given(wild_records(), st.sampled_from([*CODECS, 5]))
def test_encode_refuses_what_the_reference_refuses(case: tuple[int, list[Record]], codec: int) -> None:
    base_offset, records = case
    same_encode(records, base_offset, codec=codec)


def test_encode_of_unusual_values_matches() -> None:
    same_encode([Record(0, -1, b"k", b"v"), Record(1, 5, None, None)])  # first timestamp -1: reference
    same_encode([Record(0, 5, b"k", b"v"), Record(1, -1, None, None)])  # -1 later: compiled
    same_encode([Record(0, 0, "k", b"v")])  # type: ignore[arg-type]
    same_encode([Record(0, 0, b"k", b"v", (Header("k", bytearray(b"x")),))])  # type: ignore[arg-type]
    same_encode([Record(0, 0, b"k", b"v", (Header("\ud800", b"x"),))])  # not encodable as utf-8
    same_encode([Record(0, 0, b"k", b"v")] * 2)
    same_encode([Record(0, 0, b"k", b"v"), Record(2**31, 0, b"k", b"v")])
    same_encode([Record(0, -(2**63), None, b""), Record(1, 2**63 - 1, None, b"")])
    same_encode([Record(5, 0, None, b"")], 6)
    same_encode([], 0)


# --- decode -----------------------------------------------------------------------------------------------


@FAST
@given(st.lists(valid_records(), min_size=1, max_size=3), st.sampled_from(CODECS), st.integers(0, 2**40))
def test_decode_gives_the_reference_records(
    cases: list[tuple[int, list[Record]]], codec: int, offset_base: int
) -> None:
    data = b"".join(encode_batch(records, base, codec=codec) for base, records in cases)
    kind, _ = same_decode(data, offset_base=offset_base)
    assert kind == "ok"
    assert list(decode_records(memoryview(data), offset_base=offset_base)) == list(
        decode_records(bytearray(data), offset_base=offset_base)
    )
    # The compiled reader read every batch without a null header value (not the reference behind it).
    for (header, view), (_, records) in zip(iter_batches(data), cases, strict=True):
        read = record_compiled._read_batch(view, 0, header, offset_base)
        if all(h.value is not None for r in records for h in r.headers):
            assert read is not None


@FAST
@given(valid_records(), st.sampled_from(CODECS), st.integers(0, 2**45), st.booleans())
def test_decode_of_horizon_and_log_append_time_batches(
    case: tuple[int, list[Record]], codec: int, horizon: int, log_append_time: bool
) -> None:
    # A delete horizon makes baseTimestamp differ from the first record's; LogAppendTime uses maxTimestamp.
    base_offset, records = case
    batch = encode_batch(records, base_offset, delete_horizon_ms=horizon)
    if log_append_time:
        batch = with_attributes(batch, 0x40 | 0x08)
    header = read_header(batch, 0, True)
    batch = recompress_batch(batch, header, codec) if codec else batch
    assert same_decode(batch)[0] == "ok"
    assert same_scan(batch, 11) is not None


@MANY
@given(odd_batches(), st.booleans())
def test_odd_field_encodings_read_as_the_reference_reads_them(batch: bytes, verify_crc: bool) -> None:
    same_decode(batch, verify_crc=verify_crc)
    same_scan(batch)
    same_scan(batch, 2**62)


@MANY
@given(odd_batches(), st.sampled_from(CODECS[1:]))
def test_odd_field_encodings_in_compressed_batches(batch: bytes, codec: int) -> None:
    (base_offset, _, _, _, _, attributes, last_offset_delta, base_timestamp, _, _, _, _, count) = (
        struct.unpack_from(">qiibIhiqqqhii", batch)
    )
    packed = raw_batch(
        compression.compress(codec, batch[RECORD_BATCH_OVERHEAD:]),
        count=count,
        last_offset_delta=last_offset_delta,
        attributes=attributes | codec,
        base_offset=base_offset,
        base_timestamp=base_timestamp,
    )
    same_decode(packed)
    same_scan(packed)


@FAST
@given(valid_records(), st.sampled_from(CODECS), st.data())
def test_corrupted_records_with_a_valid_crc(
    case: tuple[int, list[Record]], codec: int, data: st.DataObject
) -> None:
    # The records' bytes (decompressed, for a compressed batch) changed, then stored with a valid CRC.
    base_offset, records = case
    plain = bytearray(encode_batch(records, base_offset))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(RECORD_BATCH_OVERHEAD, len(plain) - 1))
        plain[position] = data.draw(st.integers(0, 255) | st.sampled_from([0x01, 0x03, 0x80, 0xFF]))
    header = read_header(plain, 0, False)
    batch = raw_batch(
        compression.compress(codec, bytes(plain[RECORD_BATCH_OVERHEAD:]))
        if codec
        else bytes(plain[RECORD_BATCH_OVERHEAD:]),
        count=header.records_count,
        last_offset_delta=header.last_offset_delta,
        attributes=codec,
        base_offset=header.base_offset,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
    )
    same_decode(batch)
    same_scan(batch)


@FAST
@given(valid_records(), st.data())
def test_truncated_and_flipped_batches(case: tuple[int, list[Record]], data: st.DataObject) -> None:
    base_offset, records = case
    batch = encode_batch(records, base_offset)
    cut = data.draw(st.integers(0, len(batch)))
    for verify_crc in (True, False):
        same_decode(batch[:cut], verify_crc=verify_crc)
        same_decode(batch[cut:], verify_crc=verify_crc)
    flipped = bytearray(batch)
    position = data.draw(st.integers(0, len(batch) - 1))
    flipped[position] ^= 1 << data.draw(st.integers(0, 7))
    same_decode(bytes(flipped))
    same_decode(bytes(flipped), verify_crc=False)
    same_scan(bytes(flipped))


@MANY
@given(st.binary(max_size=400), st.booleans())
def test_random_bytes(data: bytes, verify_crc: bool) -> None:
    assert same_decode(data, verify_crc=verify_crc)[0] != "ok" or data == b""


@MANY
@given(st.binary(max_size=300), st.integers(0, 40), st.sampled_from([0, 0x08]))
def test_random_records_behind_a_valid_header(garbage: bytes, count: int, attributes: int) -> None:
    batch = raw_batch(garbage, count=count, last_offset_delta=max(count - 1, 0), attributes=attributes)
    same_decode(batch)
    same_scan(batch)


@pytest.mark.parametrize(
    "body",
    [
        b"\x00" + zz(0) + zz(0) + zz(-2) + zz(0) + zz(0),  # key length -2: null to aiokafka
        b"\x00" + zz(0) + zz(0) + zz(1) + b"k" + zz(-3) + zz(0),  # value length -3
        b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(1) + zz(1) + b"h" + zz(-2),  # header value -2
        b"\x80\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(0),  # attributes read as a 2-byte varint
        b"\x00" + zz(0) + zz(0, 6) + zz(-1) + zz(-1) + zz(0),  # 7-byte offset delta
        b"\x00" + uvarint(2**64 + 4) + zz(0) + zz(-1) + zz(-1) + zz(0),  # varlong past 64 bits
        b"\x00" + uvarint(_PAST_64_BITS[0]) + zz(0) + zz(-1) + zz(-1) + zz(0),  # ... 10 bytes either way
        b"\x00" + zz(0) + zz(0) + zz(2**62) + zz(-1) + zz(0),  # key length past any buffer
        b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(0) + b"\xff" * 12,  # garbage to the end
    ],
    ids=[
        "key-length-minus-2",
        "value-length-minus-3",
        "header-value-length-minus-2",
        "attributes-as-varint",
        "long-offset-delta",
        "varlong-past-64-bits",
        "varlong-past-64-bits-of-10-bytes",
        "huge-key-length",
        "trailing-continuation-bytes",
    ],
)
def test_fields_aiokafka_reads_leniently(body: bytes) -> None:
    batch = raw_batch(zz(len(body)) + body, count=1, last_offset_delta=0)
    assert same_decode(batch)[0] == "CodecError"
    same_scan(batch)


@pytest.mark.parametrize(
    "body",
    [
        b"\x05" + zz(0) + zz(0) + zz(-1) + zz(1) + b"v" + zz(0),  # record attributes 5: ignored by both
        b"\x00" + zz(0, 2) + zz(0) + zz(-1) + zz(1) + b"v" + zz(0),  # a 3-byte timestampDelta
        b"\x00" + zz(0) + zz(0) + zz(1, 3) + b"k" + zz(1) + b"v" + zz(0),  # a 4-byte key length
    ],
    ids=["record-attributes", "long-timestamp-delta", "long-key-length"],
)
def test_valid_but_not_canonical_records_are_read_by_the_reference(body: bytes) -> None:
    batch = raw_batch(zz(len(body), 1) + body, count=1, last_offset_delta=0)
    assert same_decode(batch)[0] == "ok"
    header = read_header(batch, 0, True)
    assert record_compiled._read_batch(memoryview(batch), 0, header, 0) is None
    same_scan(batch)


def test_kafka_clients_batches_take_the_compiled_path() -> None:
    # Real bytes from a Kafka 0.11 broker (kafka-python's test vectors): offset 0, value "123".
    batch = (
        b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00;\x00\x00\x00\x01\x02\x03"
        b"\x18\xa2p\x00\x00\x00\x00\x00\x00\x00\x00\x01]\xff{\x06<\x00\x00\x01]"
        b"\xff{\x06<\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00"
        b"\x00\x00\x01\x12\x00\x00\x00\x01\x06123\x00"
    )
    header = read_header(batch, 0, True)
    assert record_compiled._read_batch(memoryview(batch), 0, header, 5) == [
        Record(5, 1503229838908, None, b"123")
    ]
    assert same_decode(batch)[0] == "ok"
