"""Type stubs of the C extension ``storage/_keyscan.c`` (documented there)."""

from storage._cbuffer import Buffer

def scan_records(
    buf: Buffer,
    pos: int,
    end: int,
    count: int,
    offset_base: int,
    base_offset: int,
    base_timestamp: int,
    append_time: int | None,
    last_delta: int,
    key_a: bytes,
    key_b: bytes,
) -> tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes] | str: ...
def siphash24(key: bytes, data: Buffer) -> int: ...
