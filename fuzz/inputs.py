"""The fuzz targets' input layouts (fuzz/fuzz.h, fuzz/fuzz_encode.c), read and written in Python: for the
seed corpus (fuzz/make_corpus.py) and for the regression test that feeds every seed and every regression
input to the extensions through their Python API (tests/unit/test_fuzz_regressions.py), without clang.

Record targets: 25 bytes of knobs (flags: uint8; a, b, c: int64, big-endian), then one RecordBatch v2
(fuzz_recordjson's run mode: a chunk of them). Its header is read field by field, without read_header's
checks, and its records are the bytes from 61 to the end, uncompressed whatever its attributes say.

fuzz_encode: a topic (partitions, compacted, timestamp window, max.message.bytes, round-robin position),
then records as op bytes and fields, building the list of dicts the HTTP door hands agents/_encode.c.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from storage.records import RECORD_BATCH_OVERHEAD, BatchHeader

__all__ = [
    "KNOBS",
    "EncodeInput",
    "Knobs",
    "batch_header",
    "encode_input",
    "knobs",
    "read_encode_input",
    "read_knobs",
    "wrap64",
]

KNOBS = struct.Struct(">Bqqq")
_HEADER = struct.Struct(">qiibIhiqqqhii")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
NOW_MS = 1_700_000_000_000
HOUR_MS = 3_600_000
# fuzz_encode.c's timestamp windows (message.timestamp.before.max.ms, after): bits 6-7 of its first byte.
WINDOWS = ((INT64_MAX, HOUR_MS), (HOUR_MS, HOUR_MS), (0, 0), (INT64_MAX, INT64_MAX))


@dataclass(frozen=True, slots=True)
class Knobs:
    flags: int
    a: int
    b: int
    c: int


def knobs(flags: int = 0, a: int = 0, b: int = 0, c: int = 0) -> bytes:
    return KNOBS.pack(flags, a, b, c)


def read_knobs(data: bytes) -> tuple[Knobs, bytes] | None:
    """The knobs and the payload after them; None for an input the harnesses skip."""
    if len(data) < KNOBS.size:
        return None
    flags, a, b, c = KNOBS.unpack_from(data)
    return Knobs(flags, a, b, c), data[KNOBS.size :]


def batch_header(payload: bytes) -> BatchHeader | None:
    """The payload's header as the harnesses read it (fuzz_batch), with ``size`` the payload's length and
    no codec bits (the records are read as they are); None when it is shorter than a header."""
    if len(payload) < RECORD_BATCH_OVERHEAD:
        return None
    fields = _HEADER.unpack_from(payload)
    attributes = fields[5] & ~0x07
    return BatchHeader(*fields[:5], attributes, *fields[6:], len(payload))  # type: ignore[call-arg]


def wrap64(n: int) -> int:
    """``n`` as C's int64 arithmetic wraps it."""
    return (n + 2**63) % 2**64 - 2**63


# --- fuzz_encode ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EncodeInput:
    partitions: int
    compacted: bool
    before_max_ms: int
    after_max_ms: int
    max_message_bytes: int
    round_robin: int
    items: list[dict[str, Any]]


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def __bool__(self) -> bool:
        return self.pos < len(self.data)

    def take(self, n: int = 1) -> int:
        """The next ``n`` bytes, big-endian, zeros past the end (as fuzz_encode.c's take)."""
        value = 0
        for _ in range(n):
            value = (value << 8) | (self.data[self.pos] if self.pos < len(self.data) else 0)
            self.pos = min(self.pos + 1, len(self.data))
        return value

    def text(self) -> str:
        n = min(self.take(), len(self.data) - self.pos)
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        try:
            return raw.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return raw.decode("latin-1")

    def integer(self, width: int) -> object:
        """An int field: a kind byte (0 the int, 1 None, 2 the int moved past 64 bits by 2^64, 3 its
        decimal str), then the int, ``width`` bytes, signed."""
        kind = self.take() & 3
        value = int.from_bytes(self.take(width).to_bytes(width, "big"), "big", signed=True)
        big = value + 2**64 if value >= 0 else value - 2**64
        return (value, None, big, str(value))[kind]

    def field(self, kind: int) -> tuple[bool, object]:
        """(present, value) for kind 0 absent, 1 None, 2 a string, 3 an int."""
        if kind == 0:
            return False, None
        if kind == 1:
            return True, None
        return True, self.text() if kind == 2 else 7


def read_encode_input(data: bytes) -> EncodeInput | None:
    if len(data) < 7:
        return None
    c = _Cursor(data)
    topic = c.take()
    before, after = WINDOWS[topic >> 6]
    partitions, compacted = (topic & 31) + 1, bool(topic & 32)
    max_bytes, round_robin = 16 * c.take(2), c.take(4)
    items: list[dict[str, Any]] = []
    while c:
        op = c.take()
        item: dict[str, Any] = {}
        for name, kind in (("key", op & 3), ("value", (op >> 2) & 3)):
            present, value = c.field(kind)
            if present:
                item[name] = value
        if op & 16:
            item["timestamp"] = c.integer(8)
        if op & 32:
            item["partition"] = c.integer(1)
        if op & 64:
            headers = []
            for _ in range(c.take() & 3):
                kind = c.take()
                name = c.text()
                header: dict[str, Any] = {"name": 1 if kind & 4 else name}
                present, value = c.field(kind & 3)
                if present:
                    header["value"] = value
                headers.append(header)
            item["headers"] = headers
        items.append(item)
    return EncodeInput(partitions, compacted, before, after, max_bytes, round_robin, items)


def _text(value: str) -> bytes:
    raw = value.encode("utf-8", "surrogatepass")
    if len(raw) > 255:
        raise ValueError("a string of the encode target is at most 255 bytes")
    return bytes([len(raw)]) + raw


def _integer(value: object, width: int) -> bytes:
    """An int field's kind byte and int (``_Cursor.integer``)."""
    if value is None:
        kind, n = 1, 0
    elif isinstance(value, str):
        kind, n = 3, int(value)
    elif isinstance(value, int) and -(2 ** (8 * width - 1)) <= value < 2 ** (8 * width - 1):
        kind, n = 0, value
    elif isinstance(value, int):
        kind, n = 2, value - 2**64 if value > 0 else value + 2**64
        if (n < 0) == (value > 0):
            raise ValueError(f"{value} is not an int of {width} bytes moved by 2^64")
    else:
        raise TypeError(value)
    return bytes([kind]) + n.to_bytes(width, "big", signed=True)


def _kind(item: dict[str, Any], name: str) -> tuple[int, bytes]:
    if name not in item:
        return 0, b""
    value = item[name]
    if value is None:
        return 1, b""
    if isinstance(value, str):
        return 2, _text(value)
    return 3, b""


def encode_input(
    items: list[dict[str, Any]],
    *,
    partitions: int = 4,
    compacted: bool = False,
    window: int = 0,
    max_message_bytes: int = 16 * 0xFFFF,
    round_robin: int = 0,
) -> bytes:
    """The fuzz_encode input that builds ``items`` (str, int or None fields, at most 3 headers)."""
    out = bytearray([(partitions - 1) | (32 if compacted else 0) | (window << 6)])
    out += struct.pack(">HI", max_message_bytes // 16, round_robin)
    for item in items:
        key_kind, key = _kind(item, "key")
        value_kind, value = _kind(item, "value")
        op = key_kind | value_kind << 2
        fields = key + value
        if "timestamp" in item:
            op |= 16
            fields += _integer(item["timestamp"], 8)
        if "partition" in item:
            op |= 32
            fields += _integer(item["partition"], 1)
        if "headers" in item:
            op |= 64
            fields += bytes([len(item["headers"])])
            for header in item["headers"]:
                header_kind, header_value = _kind(header, "value")
                name = header["name"]
                if not isinstance(name, str):  # a wrong type: the harness writes the int 1
                    header_kind, name = header_kind | 4, ""
                fields += bytes([header_kind]) + _text(name) + header_value
        out += bytes([op]) + fields
    return bytes(out)
