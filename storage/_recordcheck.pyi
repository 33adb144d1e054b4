"""Type stubs of the C extension ``storage/_recordcheck.c`` (documented there)."""

from collections.abc import Callable
from typing import TypeVar

from storage._cbuffer import Buffer

T = TypeVar("T")

def check_records(
    buf: Buffer,
    start: int,
    end: int,
    count: int,
    last_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    compacted: bool,
) -> tuple[int, int, int, int]: ...
def schema_refs(
    buf: Buffer,
    start: int,
    end: int,
    count: int,
    last_delta: int,
    key: bool,
    header: bytes,
    indexes: bool,
    each: bool,
) -> tuple[list[tuple[int, int, int | bytes, bytes | None, int, int]], int]: ...
def plain_batches(
    buf: memoryview,
    compacted: bool,
    max_bytes: int,
    lowest_ts: int,
    highest_ts: int,
    make: Callable[[str, int, memoryview, int, int, int, int, int, int, bool], T],
    topic: str,
    partition: int,
) -> list[T] | None: ...
def any_compressed(buf: Buffer) -> bool: ...
