"""Confluent's Protobuf message indexes: which message of a schema a payload holds, sans IO.

After the magic byte 0 and the 4-byte big-endian schema id, a Protobuf payload starts with the path of its
message in the schema's file::

    count        zig-zag varint       number of indexes that follow (never negative)
    index * count zig-zag varint      0-based: the top-level message, then a nested message in it, ...

The common case, the first top-level message (``[0]``), is written as the single byte ``0x00`` (a count
of 0), which is read back as ``[0]``. A varint takes at most 10 bytes (64 bits).

An index counts a file's messages (``message_type``), then a message's nested messages (``nested_type``),
as its descriptor lists them: map fields' synthetic entry messages count, as confluent-kafka's serializer
(``_create_index_array`` over ``Descriptor.nested_types``) and the Java serializer (from a compiled class)
count them; a path that ends at a map entry is refused, since no record is a map entry.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from registry.formats.payload import InvalidPayload

if TYPE_CHECKING:
    # Types only: the message-index codec is read on every produce that validates schemas, and needs none
    # of protobuf's runtime (registry/formats/lazy.py).
    from google.protobuf import descriptor_pb2

MAX_VARINT_BYTES = 10


def _read_varint(data: bytes | memoryview, offset: int) -> tuple[int, int]:
    value = shift = 0
    for used in range(MAX_VARINT_BYTES):
        if offset + used >= len(data):
            raise InvalidPayload(f"message indexes: truncated varint at byte {offset + used}")
        byte = data[offset + used]
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), used + 1
    raise InvalidPayload(f"message indexes: varint at byte {offset} is longer than {MAX_VARINT_BYTES} bytes")


def read_message_indexes(data: bytes | memoryview, offset: int = 0) -> tuple[list[int], int]:
    """The indexes starting at ``data[offset]`` and the number of bytes they take."""
    count, used = _read_varint(data, offset)
    if count == 0:
        return [0], used
    if count < 0:
        raise InvalidPayload(f"message indexes: negative count {count}")
    # Every index takes at least one byte: a larger count is a lie, refused before any work.
    if count > len(data) - offset - used:
        raise InvalidPayload(
            f"message indexes: {count} declared, only {len(data) - offset - used} bytes follow"
        )
    indexes = []
    for _ in range(count):
        index, size = _read_varint(data, offset + used)
        if index < 0:
            raise InvalidPayload(f"message indexes: negative index {index}")
        indexes.append(index)
        used += size
    return indexes, used


def _write_varint(out: bytearray, value: int) -> None:
    encoded = (value << 1) ^ (value >> 63)
    while encoded > 0x7F:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)


def write_message_indexes(indexes: Sequence[int]) -> bytes:
    if not indexes or any(index < 0 for index in indexes):
        raise ValueError(f"message indexes must be a non-empty list of non-negative ints: {indexes!r}")
    if list(indexes) == [0]:
        return b"\x00"
    out = bytearray()
    _write_varint(out, len(indexes))
    for index in indexes:
        _write_varint(out, index)
    return bytes(out)


def message_name(file: descriptor_pb2.FileDescriptorProto, indexes: Sequence[int]) -> str:
    """The full name of the message ``indexes`` address in ``file``."""
    if not indexes:
        raise InvalidPayload("message indexes: empty")
    names = [file.package] if file.package else []
    messages = file.message_type
    for depth, index in enumerate(indexes):
        if index >= len(messages):
            where = "the file" if depth == 0 else ".".join(names)
            raise InvalidPayload(
                f"message index {index} at depth {depth} is out of range: {where} has "
                f"{len(messages)} message(s)"
            )
        message = messages[index]
        names.append(message.name)
        messages = message.nested_type
    if message.options.map_entry:
        raise InvalidPayload(f"message indexes {list(indexes)} address a map entry ({'.'.join(names)})")
    return ".".join(names)


def message_indexes(file: descriptor_pb2.FileDescriptorProto, full_name: str) -> list[int]:
    """The indexes that address ``full_name`` in ``file`` (``KeyError`` if it declares no such message)."""
    for name, indexes in walk_messages(file):
        if name == full_name:
            return indexes
    raise KeyError(full_name)


def walk_messages(file: descriptor_pb2.FileDescriptorProto) -> Iterator[tuple[str, list[int]]]:
    """Every message of ``file`` but map entries, with its indexes: each message before its nested ones,
    in declaration order (the names RecordNameStrategy can use). Nesting depth is bounded by protobuf's
    own parse limit, so the recursion is too."""

    def walk(
        prefix: str, path: list[int], messages: Sequence[descriptor_pb2.DescriptorProto]
    ) -> Iterator[tuple[str, list[int]]]:
        for index, message in enumerate(messages):
            if message.options.map_entry:
                continue
            name = f"{prefix}.{message.name}" if prefix else message.name
            yield name, [*path, index]
            yield from walk(name, [*path, index], message.nested_type)

    yield from walk(file.package, [], file.message_type)
