"""Kafka's primitive encodings, for the codecs written by hand (produce_codec.py, fetch_codec.py).

Integers are big-endian. Classic versions prefix arrays with an int32 count and strings with an int16
length (-1: null); flexible versions (KIP-482) use an unsigned varint of count + 1 and length + 1 (0:
null), and end each structure with a tagged-field section, written here as empty (one 0 byte).
"""

from __future__ import annotations

import struct

from storage.records.encode import uvarint

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
NULL_CLASSIC = I16.pack(-1)
EMPTY_ARRAY_CLASSIC = I32.pack(0)
NO_TAGS = b"\x00"

__all__ = [
    "EMPTY_ARRAY_CLASSIC",
    "I16",
    "I32",
    "I64",
    "NO_TAGS",
    "NULL_CLASSIC",
    "count",
    "string",
    "uvarint",
]


def count(n: int, flexible: bool) -> bytes:
    """An array's count (or a bytes field's length) in either encoding."""
    return uvarint(n + 1) if flexible else I32.pack(n)


def string(s: str | None, flexible: bool) -> bytes:
    """A nullable string in either encoding."""
    if s is None:
        return b"\x00" if flexible else NULL_CLASSIC
    raw = s.encode("utf-8")
    return (uvarint(len(raw) + 1) if flexible else I16.pack(len(raw))) + raw
