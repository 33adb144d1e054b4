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
