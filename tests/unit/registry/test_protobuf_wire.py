"""Confluent's Protobuf message indexes: read and written as confluent-kafka does, resolved to message
names as its serializer computes them, and every malformed array refused with InvalidPayload."""

from __future__ import annotations

import io

import pytest
from confluent_kafka.schema_registry.common.protobuf import _create_index_array
from confluent_kafka.schema_registry.common.serde import SchemaId
from google.protobuf.descriptor import Descriptor
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.formats.protobuf import FORMAT
from registry.formats.protobuf_wire import (
    InvalidPayload,
    message_indexes,
    message_name,
    read_message_indexes,
    write_message_indexes,
)
from tests.examples import examples

FAST = settings(max_examples=examples(200), deadline=None)

SCHEMA = FORMAT.parse(
    """syntax = "proto3";
package shop;
message Order {
  map<string, int32> stock = 1;
  message Line {
    message Note { string text = 1; }
  }
  map<int32, Line> lines = 2;
  message Gift {}
}
message Refund {}
""",
    [],
)


def confluent_encoded(indexes: list[int]) -> bytes:
    out = io.BytesIO()
    SchemaId._encode_varints(out, indexes, zigzag=True)
    return out.getvalue()


def confluent_decoded(data: bytes) -> list[int]:
    return SchemaId._read_index_array(io.BytesIO(data), zigzag=True)


indexes_lists = st.lists(st.integers(min_value=0, max_value=2**31 - 1), min_size=1, max_size=8)


@FAST
@given(indexes_lists, st.binary(max_size=8))
def test_confluent_writes_what_we_read(indexes: list[int], rest: bytes) -> None:
    encoded = confluent_encoded(indexes)
    assert read_message_indexes(encoded + rest) == (indexes, len(encoded))


@FAST
@given(indexes_lists)
def test_we_write_what_confluent_reads(indexes: list[int]) -> None:
    encoded = write_message_indexes(indexes)
    assert encoded == confluent_encoded(indexes)
    assert confluent_decoded(encoded) == indexes


def test_first_message_is_one_zero_byte() -> None:
    assert write_message_indexes([0]) == b"\x00"
    assert read_message_indexes(b"\x00payload") == ([0], 1)
    assert read_message_indexes(b"\xff\x00\x04\x00\x02", offset=2) == ([0, 1], 3)


@FAST
@given(st.binary(max_size=24))
def test_random_bytes_read_or_raise_invalid_payload(data: bytes) -> None:
    try:
        indexes, used = read_message_indexes(data)
    except InvalidPayload:
        return
    assert 0 < used <= len(data)
    assert all(index >= 0 for index in indexes)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "truncated varint at byte 0"),
        (b"\x80", "truncated varint at byte 1"),
        (b"\x01", "negative count -1"),
        (b"\x06\x00", "3 declared, only 1 bytes follow"),
        (b"\x02\x01", "negative index -1"),
        (b"\xff" * 10 + b"\x01", "longer than 10 bytes"),
    ],
)
def test_malformed_indexes(data: bytes, reason: str) -> None:
    with pytest.raises(InvalidPayload, match=reason):
        read_message_indexes(data)


def test_write_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        write_message_indexes([])
    with pytest.raises(ValueError, match="non-negative"):
        write_message_indexes([1, -1])


def _descriptors(descriptor: Descriptor) -> list[Descriptor]:
    found = [descriptor]
    for nested in descriptor.nested_types:
        found += _descriptors(nested)
    return found


def test_indexes_match_confluent_kafkas_serializer() -> None:
    """For every message, confluent-kafka's _create_index_array (map entries counted, as its serializer
    sends them) and ours agree, both ways."""
    file = SCHEMA.pool.FindFileByName("default.proto")
    seen = 0
    for top in file.message_types_by_name.values():
        for descriptor in _descriptors(top):
            if descriptor.GetOptions().map_entry:
                continue
            theirs = _create_index_array(descriptor)
            assert message_indexes(SCHEMA.file, descriptor.full_name) == theirs
            assert message_name(SCHEMA.file, theirs) == descriptor.full_name
            seen += 1
    assert seen == len(SCHEMA.record_names()) == 5


def test_resolution_errors() -> None:
    with pytest.raises(InvalidPayload, match="index 2 at depth 0 is out of range: the file has 2 message"):
        message_name(SCHEMA.file, [2])
    with pytest.raises(InvalidPayload, match=r"index 9 at depth 1 is out of range: shop.Order has 4 message"):
        message_name(SCHEMA.file, [0, 9])
    with pytest.raises(InvalidPayload, match=r"address a map entry \(shop.Order.StockEntry\)"):
        message_name(SCHEMA.file, [0, 0])
    with pytest.raises(InvalidPayload, match="empty"):
        message_name(SCHEMA.file, [])
    with pytest.raises(KeyError):
        message_indexes(SCHEMA.file, "shop.Nope")
