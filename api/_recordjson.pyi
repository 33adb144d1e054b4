"""Type stubs of the C extension ``api/_recordjson.c`` (documented there)."""

from storage._cbuffer import Buffer

def render_batch(
    out: bytearray,
    buf: Buffer,
    pos: int,
    end: int,
    count: int,
    first_offset: int,
    base_timestamp: int,
    append_time: int | None,
    last_delta: int,
    start_offset: int,
    base64: bool,
    size: int,
    max_bytes: int,
    nonempty: bool,
) -> tuple[int, int, int, bool, bool] | None: ...
def render_offsets(out: bytearray, order: Buffer, partitions: list[int], bases: list[int]) -> int: ...
def render_run(
    out: bytearray,
    data: Buffer,
    pos: int,
    offset_base: int,
    start_offset: int,
    base64: bool,
    size: int,
    max_bytes: int,
    nonempty: bool,
) -> tuple[int, int, int, bool, bool, int] | None: ...
