"""The multi-partition file's constants and a chunk's footer entry (``ChunkMeta``), with the checks both
the writer and the reader apply to an entry's values. The byte layout is drawn in ``storage/fileformat``'s
package docstring.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from pyroaring import BitMap

MAGIC = b"STRATA"
FORMAT_VERSION = 1
TRAILER = struct.Struct(">IIH6s")
TRAILER_SIZE = TRAILER.size

COUNT = struct.Struct(">I")
TOPIC_LENGTH = struct.Struct(">H")
# partition, position, length, record_count, last_offset_delta, min_ts, max_ts, crc, flags
ENTRY = struct.Struct(">IQIIIqqIB")
BITMAP_LENGTH = struct.Struct(">I")

FLAG_BITMAP = 0x01

U16_MAX = (1 << 16) - 1
U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1
I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class ChunkMeta:
    """One footer entry. ``present is None`` means dense (every relative offset 0..last_offset_delta).

    Offsets here are relative to the chunk's base offset, which only the metadata store knows.
    """

    topic: str
    partition: int
    position: int
    length: int
    record_count: int
    last_offset_delta: int
    min_timestamp: int
    max_timestamp: int
    crc: int
    # BitMap is unhashable; leaving it out of the hash keeps equal metas hashing equal.
    present: BitMap | None = field(hash=False)

    @property
    def end(self) -> int:
        """The byte just past the chunk in its object."""
        return self.position + self.length


def check_meta_values(
    topic_bytes: bytes,
    partition: int,
    length: int,
    record_count: int,
    last_offset_delta: int,
    min_timestamp: int,
    max_timestamp: int,
    present: BitMap | None,
) -> str | None:
    """Return why these footer values are inconsistent, or None; shared by the writer and the reader."""
    if not 1 <= len(topic_bytes) <= U16_MAX:
        return f"topic is {len(topic_bytes)} utf-8 bytes, not 1..65535"
    if not 0 <= partition <= U32_MAX:
        return f"partition {partition} does not fit in u32"
    if not 1 <= length <= U32_MAX:
        return f"chunk length {length} is not 1..2^32-1"
    if not 1 <= record_count <= U32_MAX:
        return f"record count {record_count} is not 1..2^32-1"
    if not 0 <= last_offset_delta <= U32_MAX:
        return f"last offset delta {last_offset_delta} does not fit in u32"
    if not I64_MIN <= min_timestamp <= max_timestamp <= I64_MAX:
        return f"timestamps {min_timestamp}..{max_timestamp} are not an int64 range"
    if present is None:
        if record_count != last_offset_delta + 1:
            return f"dense chunk has {record_count} records but spans {last_offset_delta + 1} offsets"
    else:
        if len(present) != record_count:
            return f"bitmap holds {len(present)} offsets but the chunk has {record_count} records"
        if present.max() != last_offset_delta:
            return f"bitmap ends at {present.max()} but the last offset delta is {last_offset_delta}"
    return None
