"""Type stubs of the C extension ``storage/_recordcheck.c`` (documented there)."""

from storage._cbuffer import Buffer

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
    buf: Buffer, compacted: bool, max_bytes: int, lowest_ts: int, highest_ts: int
) -> list[tuple[int, int, int, int, int, int, int, int, bool]] | None: ...
def any_compressed(buf: Buffer) -> bool: ...
