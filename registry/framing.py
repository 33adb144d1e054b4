"""Confluent's schema-id framing of a record's key or value, read for validation on produce, sans IO.

A serializer of Confluent's (confluent-kafka, the Java clients, ``@kafkajs/confluent-schema-registry``)
says which registered schema wrote a key or value in one of two ways::

    prefix form (the default), in the field itself:
        magic      int8                 0
        schema id  int32, big-endian    a registered id
        indexes    Protobuf only        message indexes (registry/formats/protobuf_wire.py)
        payload                         the Avro binary, JSON text or Protobuf message

    header form (confluent-kafka's ``header_schema_id_serializer``), in a record header named
    ``__key_schema_id`` or ``__value_schema_id``:
        magic      int8                 1
        guid       16 bytes             the schema's GUID (RFC 9562 bytes, as uuid.UUID.bytes)
        indexes    Protobuf only        message indexes
    and the field holds the payload alone.

A record with the header reads it (its first such header, as confluent-kafka's ``dual_schema_id_deserializer``
does) and any other value of that header is refused; a header with magic 0 and an id, which that
deserializer would also read, is refused too: no serializer writes it. A null field carries no schema
and passes (Confluent Server lets tombstones through).

``scan`` reads a batch's records section with the C walk of ``storage/_recordcheck.c`` (``schema_refs``):
no Python object per record, and, unless ``each``, one ``Ref`` per run of records that name the same
schema the same way, so that checking a batch of one schema costs one lookup. ``scan_reference`` is the
same result from decoded records, in Python: the authority the C walk is tested against.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import NamedTuple

from registry.formats.payload import InvalidPayload
from registry.formats.protobuf_wire import read_message_indexes
from storage._recordcheck import schema_refs
from storage.records import Record
from storage.topic_config import KEY

MAGIC_ID = 0
MAGIC_GUID = 1
ID_PREFIX = 5  # magic and id
GUID_HEADER = 17  # magic and GUID
HEADERS = {KEY: "__key_schema_id", "value": "__value_schema_id"}
_HEADER_BYTES = {field: name.encode() for field, name in HEADERS.items()}


class Kind(IntEnum):
    ID = 1
    GUID = 2
    BAD = 3


class Bad(IntEnum):
    """Why a field names no schema (``Ref.ref`` of a ``Kind.BAD``)."""

    SHORT = 1  # shorter than magic and id, and no header
    MAGIC = 2  # a first byte other than 0, and no header
    HEADER = 3  # the header is not magic 1 and a 16-byte GUID


class Ref(NamedTuple):
    """What a record's key or value says of its schema.

    ``record``: the record's index in its batch (the first of its run). ``ref``: the id (``Kind.ID``), the
    GUID's 16 bytes (``Kind.GUID``) or a ``Bad`` reason. ``indexes``: the message indexes' bytes (after
    the id when they were measured and parse; after the GUID in the header), else None. ``start`` and
    ``end`` delimit the field in the scanned buffer."""

    record: int
    kind: int
    ref: int | bytes
    indexes: bytes | None
    start: int
    end: int


def scan(
    buf: bytes | bytearray | memoryview,
    start: int,
    end: int,
    count: int,
    last_delta: int,
    field: str,
    *,
    indexes: bool,
    each: bool,
) -> tuple[list[Ref], int]:
    """The refs of ``count`` records in ``buf[start:end]`` (a records section that ``check_records``
    passed) and how many of them had a null ``field``. See ``storage/_recordcheck.c``."""
    found, nulls = schema_refs(
        buf, start, end, count, last_delta, field == KEY, _HEADER_BYTES[field], indexes, each
    )
    return [Ref._make(item) for item in found], nulls


def payload_start(ref: Ref, protobuf: bool) -> int:
    """Where the payload starts in the scanned buffer: after the id (and the indexes of a Protobuf
    payload) in the prefix form, at the field's start in the header form."""
    if ref.kind == Kind.GUID:
        return ref.start
    return ref.start + ID_PREFIX + (len(ref.indexes or b"") if protobuf else 0)


def parse_indexes(raw: bytes) -> list[int]:
    """The message indexes ``raw`` holds, all of it (``InvalidPayload`` otherwise)."""
    found, used = read_message_indexes(raw)
    if used != len(raw):
        raise InvalidPayload(f"message indexes: {len(raw) - used} bytes after them in the header")
    return found


def scan_reference(
    recs: Sequence[Record], field: str, *, indexes: bool, each: bool
) -> tuple[list[tuple[int, int, int | bytes, bytes | None, bytes]], int]:
    """``scan`` computed from decoded records: (record, kind, ref, indexes, field bytes) per ref."""
    out: list[tuple[int, int, int | bytes, bytes | None, bytes]] = []
    nulls = 0
    last: tuple[int, int | bytes, bytes | None] | None = None
    for i, rec in enumerate(recs):
        data = rec.key if field == KEY else rec.value
        if data is None:
            nulls += 1
            continue
        kind, ref, tail = _classify(rec, data, field, indexes)
        if each or (kind, ref, tail) != last:
            out.append((i, kind, ref, tail, data))
            last = (kind, ref, tail)
        if kind == Kind.BAD:
            break
    return out, nulls


def _classify(rec: Record, data: bytes, field: str, indexes: bool) -> tuple[int, int | bytes, bytes | None]:
    header = next((h for h in rec.headers if h.key == HEADERS[field]), None)
    if header is not None:
        value = header.value
        if value is None or len(value) < GUID_HEADER or value[0] != MAGIC_GUID:
            return Kind.BAD, Bad.HEADER, None
        return Kind.GUID, value[1:GUID_HEADER], value[GUID_HEADER:]
    if len(data) < ID_PREFIX:
        return Kind.BAD, Bad.SHORT, None
    if data[0] != MAGIC_ID:
        return Kind.BAD, Bad.MAGIC, None
    tail = None
    if indexes:
        try:
            _, used = read_message_indexes(data, ID_PREFIX)
        except InvalidPayload:
            used = -1
        tail = data[ID_PREFIX : ID_PREFIX + used] if used >= 0 else None
    return Kind.ID, int.from_bytes(data[1:ID_PREFIX], "big"), tail
