"""The C walk that reads each record's schema reference (storage/_recordcheck.c ``schema_refs``, through
registry/framing.py's ``scan``) gives what the Python reference reads from decoded records, on batches
built to hit every branch (null fields, short fields, wrong magic bytes, schema headers good and bad,
message indexes good and bad, runs) and on random ones."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.formats.payload import InvalidPayload
from registry.framing import Bad, Kind, parse_indexes, payload_start, scan, scan_reference
from storage import records
from storage.records import compression
from tests.examples import examples

NOW = 1_700_000_000_000
HEADER_NAMES = ["__value_schema_id", "__key_schema_id", "trace", ""]


def _field_bytes() -> st.SearchStrategy[bytes | None]:
    framed = st.builds(
        lambda i, tail: b"\x00" + struct.pack(">I", i) + tail,
        st.sampled_from([0, 1, 17, 2**31 - 1, 2**32 - 1]),
        st.one_of(
            st.binary(max_size=12),
            st.sampled_from([b"\x00", b"\x02\x02", b"\x04\x00\x02abc", b"\x01", b"\x7f", b"\xff" * 11]),
        ),
    )
    return st.one_of(st.none(), st.binary(max_size=8), framed)


def _header() -> st.SearchStrategy[records.Header]:
    guid = st.builds(
        lambda g, tail: b"\x01" + g + tail, st.binary(min_size=16, max_size=16), st.binary(max_size=4)
    )
    value = st.one_of(st.none(), st.binary(max_size=20), guid)
    return st.builds(records.Header, st.sampled_from(HEADER_NAMES), value)


_RECORD = st.tuples(_field_bytes(), _field_bytes(), st.lists(_header(), max_size=3))


def _batch(fields: list[tuple[bytes | None, bytes | None, list[records.Header]]], codec: int = 0) -> bytes:
    recs = [records.Record(i, NOW, k, v, tuple(h)) for i, (k, v, h) in enumerate(fields)]
    return records.encode_batch(recs, codec=codec)


def _both(data: bytes, field: str, indexes: bool, each: bool) -> None:
    header = records.read_header(data, 0, True)
    buf, start, end = records.expand_records(data, header)
    refs, nulls = scan(
        buf, start, end, header.records_count, header.last_offset_delta, field, indexes=indexes, each=each
    )
    decoded = records.decode_records(data)
    expected, expected_nulls = scan_reference(decoded, field, indexes=indexes, each=each)
    got = [(r.record, r.kind, r.ref, r.indexes, bytes(memoryview(buf)[r.start : r.end])) for r in refs]
    assert (got, nulls) == (expected, expected_nulls)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(_RECORD, min_size=1, max_size=12),
    st.sampled_from(["key", "value"]),
    st.booleans(),
    st.booleans(),
)
def test_the_c_walk_reads_what_the_reference_reads(
    fields: list[tuple[bytes | None, bytes | None, list[records.Header]]],
    field: str,
    indexes: bool,
    each: bool,
) -> None:
    _both(_batch(fields), field, indexes, each)


@pytest.mark.parametrize("codec", [compression.NONE, compression.LZ4])
def test_runs_collapse_records_of_one_reference(codec: int) -> None:
    value = b"\x00\x00\x00\x00\x11"
    fields: list[tuple[bytes | None, bytes | None, list[records.Header]]] = [
        (b"k", value + bytes([i]), []) for i in range(100)
    ]
    fields[40] = (b"k", None, [])  # a tombstone does not break the run
    fields[60] = (b"k", b"\x00\x00\x00\x00\x12", [])
    data = _batch(fields, codec)
    header = records.read_header(data, 0, True)
    buf, start, end = records.expand_records(data, header)
    refs, nulls = scan(buf, start, end, 100, 99, "value", indexes=False, each=False)
    assert [(r.record, r.kind, r.ref) for r in refs] == [
        (0, Kind.ID, 17),
        (60, Kind.ID, 18),
        (61, Kind.ID, 17),
    ]
    assert nulls == 1
    each, _ = scan(buf, start, end, 100, 99, "value", indexes=False, each=True)
    assert len(each) == 99
    _both(data, "value", True, False)


def test_the_walk_stops_at_the_first_field_without_a_schema() -> None:
    fields: list[tuple[bytes | None, bytes | None, list[records.Header]]] = [
        (b"k", b"\x00\x00\x00\x00\x11", []),
        (b"k", b"\x07\x00\x00\x00\x11", []),
        (b"k", b"", []),
    ]
    data = _batch(fields)
    header = records.read_header(data, 0, True)
    refs, _ = scan(data, 61, header.size, 3, 2, "value", indexes=False, each=False)
    assert [(r.record, r.kind, r.ref) for r in refs] == [(0, Kind.ID, 17), (1, Kind.BAD, Bad.MAGIC)]


def test_records_that_do_not_parse_are_refused() -> None:
    data = _batch([(b"k", b"\x00\x00\x00\x00\x11", [])])
    header = records.read_header(data, 0, True)
    with pytest.raises(ValueError, match="check_records first"):
        scan(data, 61, header.size, 2, 1, "value", indexes=False, each=False)
    with pytest.raises(ValueError, match="out of range"):
        scan(data, 61, header.size + 1, 1, 0, "value", indexes=False, each=False)


def test_the_payload_starts_after_the_framing() -> None:
    data = _batch([(b"k", b"\x00\x00\x00\x00\x32\x04\x02\x04PAY", [])])
    header = records.read_header(data, 0, True)
    (ref,), _ = scan(data, 61, header.size, 1, 0, "value", indexes=True, each=True)
    assert ref.indexes == b"\x04\x02\x04"
    assert parse_indexes(ref.indexes) == [1, 2]
    assert data[payload_start(ref, True) : ref.end] == b"PAY"
    assert data[payload_start(ref, False) : ref.end] == b"\x04\x02\x04PAY"
    with pytest.raises(InvalidPayload, match="bytes after them"):
        parse_indexes(b"\x00\x00")
