"""Type stubs of the C extension ``agents/_encode.c`` (documented there)."""

from typing import Any

def encode_records(
    items: list[Any],
    partitions: int,
    compacted: bool,
    max_message_bytes: int,
    now_ms: int,
    before_max_ms: int,
    after_max_ms: int,
    max_timestamp_ms: int,
    round_robin: int,
) -> tuple[list[tuple[int, bytearray, int, int, int, int]], bytes, int] | None: ...
def assemble_batches(parts: list[tuple[int, bytearray, int, int, int, int]]) -> bytearray: ...
def crc32c(data: bytes | bytearray | memoryview, portable: bool) -> int: ...
