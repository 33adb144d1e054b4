"""storage/records/check.py (and its C loop) against the reference decoder: the same verdict on valid,
mutated and random batches, and Kafka's record rules on top (keys on compacted topics, maxTimestamp)."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.errors import CodecError, InvalidRecord
from storage.records import Header, Record, compression, encode_batch, read_header
from storage.records.check import check_batch
from storage.records.decode import decode_records_reference
from tests.examples import examples
from tests.unit.test_records import raw_batch, raw_record, simple_body, zz

FAST = settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check(batch: bytes, compacted: bool = False) -> tuple[int, int]:
    checked = check_batch(batch, read_header(batch, 0, True), compacted)
    return checked.min_timestamp, checked.max_timestamp


def _records(n: int, key: bytes | None = b"k") -> list[Record]:
    return [
        Record(i, 1000 + (i * 7) % 5, key, b"v" * i, (Header("h", b"x"),) if i % 2 else ()) for i in range(n)
    ]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_valid_batches_pass_and_give_their_timestamps(codec: int) -> None:
    batch = encode_batch(_records(20), codec=codec)
    assert _check(batch) == (1000, 1004)
    assert _check(batch, compacted=True) == (1000, 1004)


def test_a_valid_crc_over_garbage_records_is_refused() -> None:
    """What an uncompressed batch of garbage with a correct CRC-32C gets: INVALID_RECORD, not stored."""
    garbage = bytes(range(7, 250))
    batch = raw_batch(garbage, count=3, last_offset_delta=2)
    with pytest.raises(InvalidRecord) as caught:
        _check(batch)
    assert caught.value.record_index is not None


def test_a_compacted_topic_refuses_a_record_without_a_key_and_names_it() -> None:
    records = _records(5)
    records[3] = Record(3, 1003, None, b"no key")
    batch = encode_batch(records)
    assert _check(batch) == (1000, 1004)
    with pytest.raises(InvalidRecord) as caught:
        _check(batch, compacted=True)
    assert caught.value.record_index == 3


def test_offset_deltas_must_be_zero_to_n_minus_one() -> None:
    body = raw_record(simple_body(0)) + raw_record(simple_body(2))  # deltas 0, 2 in a batch of 2
    with pytest.raises(InvalidRecord) as caught:
        _check(raw_batch(body, count=2, last_offset_delta=1))
    assert caught.value.record_index == 1
    repeated = raw_record(simple_body(0)) + raw_record(simple_body(0))
    with pytest.raises(InvalidRecord):
        _check(raw_batch(repeated, count=2, last_offset_delta=1))


def test_bytes_after_the_last_record_are_refused() -> None:
    one = raw_record(simple_body(0))
    with pytest.raises(InvalidRecord, match="bytes after"):
        _check(raw_batch(one + b"\x00\x00", count=1))


def test_the_header_timestamps_are_not_the_producers_to_get_right() -> None:
    # A lying maxTimestamp or a LogAppendTime claim passes: the caller rewrites the header, as Kafka's
    # broker does; the check reports the records' own largest timestamp.
    one = raw_record(simple_body(0))
    assert _check(raw_batch(one, count=1, base_timestamp=1000, max_timestamp=9999)) == (1000, 1000)
    assert _check(raw_batch(one, count=1, base_timestamp=5, max_timestamp=5, attributes=0x08)) == (5, 5)


def test_a_compressed_bomb_is_a_codec_error_within_the_bound() -> None:
    inflated = compression.output_limit(0) + 1
    payload = compression.compress(compression.ZSTD, bytes(inflated))
    batch = raw_batch(payload, count=1, attributes=compression.ZSTD)
    with pytest.raises(CodecError):
        _check(batch)


def test_header_names_must_be_utf8() -> None:
    body = b"\x00" + zz(0) + zz(0) + zz(1) + b"k" + zz(1) + b"v" + zz(1) + zz(2) + b"\xff\xfe" + zz(-1)
    with pytest.raises(InvalidRecord):
        _check(raw_batch(raw_record(body), count=1))


def _with_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def _reference_verdict(batch: bytes, compacted: bool) -> bool:
    """Whether the reference decoder reads the batch, and Kafka's rules on top hold."""
    try:
        records = list(decode_records_reference(batch))
    except CodecError:
        return False
    return not (compacted and any(r.key is None for r in records))


@FAST
@given(
    records=st.lists(
        st.builds(
            Record,
            offset=st.just(0),
            timestamp=st.integers(0, 2**40),
            key=st.none() | st.binary(max_size=8),
            value=st.none() | st.binary(max_size=16),
            headers=st.lists(
                st.builds(Header, st.text(max_size=4), st.none() | st.binary(max_size=4)), max_size=2
            ).map(tuple),
        ),
        min_size=1,
        max_size=6,
    ),
    flips=st.lists(st.tuples(st.integers(61, 400), st.integers(0, 255)), max_size=3),
    compacted=st.booleans(),
)
def test_mutated_batches_get_the_reference_verdict(
    records: list[Record], flips: list[tuple[int, int]], compacted: bool
) -> None:
    numbered = [Record(i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)]
    batch = bytearray(encode_batch(numbered))
    for at, value in flips:
        if at < len(batch):
            batch[at] = value
    data = _with_crc(batch)
    try:
        _check(data, compacted)
        passed = True
    except InvalidRecord:
        passed = False
    assert passed == _reference_verdict(data, compacted)


@FAST
@given(body=st.binary(max_size=200), count=st.integers(1, 5))
def test_random_record_bytes_never_raise_anything_but_invalid_record(body: bytes, count: int) -> None:
    batch = raw_batch(body, count=count, last_offset_delta=count - 1)
    try:
        read_header(batch, 0, True)
    except CodecError:
        return  # refused at the header (a count the bytes cannot hold): INVALID_RECORD, by the caller
    try:
        _check(batch)
    except InvalidRecord:
        return
    assert _reference_verdict(batch, False)
