"""Type stubs of the C extension ``planner/_probe.c`` (documented there)."""

from typing import Any, TypeAlias

import numpy as np

# Anything with the buffer protocol that the C code reads (numpy's stubs do not declare it as a Buffer).
Buffer: TypeAlias = bytes | bytearray | memoryview | np.ndarray[Any, Any]

def put_many(
    table: Buffer, slots: int, capacity: int, size: int, h1: Buffer, h2: Buffer, offsets: Buffer
) -> tuple[int, int]: ...
def get_many(table: Buffer, slots: int, h1: Buffer, h2: Buffer) -> bytes: ...
