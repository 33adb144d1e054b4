"""Type stubs of the C extension ``storage/_recordcols.c`` (documented there)."""

from storage._cbuffer import Buffer

def decode_columns(
    columns: tuple[bytearray, bytearray, bytearray, bytearray, bytearray, bytearray, bytearray, bytearray],
    buf: Buffer,
    pos: int,
    end: int,
    count: int,
    first_offset: int,
    base_timestamp: int,
    append_time: int | None,
    last_delta: int,
    start: int,
    stop: int,
) -> int | None: ...
