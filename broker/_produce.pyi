"""Type stubs of the C extension ``broker/_produce.c`` (documented there)."""

from storage._cbuffer import Buffer

def decode(
    frame: Buffer,
) -> tuple[int, int, str | None, int, int, list[tuple[str, list[tuple[int, memoryview | None]]]]]: ...
