"""Type stubs of the C extension ``planner/_probe.c`` (documented there)."""

from storage._cbuffer import Buffer

def put_many(
    table: Buffer, slots: int, capacity: int, size: int, h1: Buffer, h2: Buffer, offsets: Buffer
) -> tuple[int, int]: ...
def get_many(table: Buffer, slots: int, h1: Buffer, h2: Buffer) -> bytes: ...
