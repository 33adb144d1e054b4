"""Type stubs of the C extension ``agents/_layout.c`` (documented there)."""

from typing import Any

from storage.objectstore.base import Piece

class OpenChunk:
    @property
    def pieces(self) -> list[Piece]: ...
    @property
    def count(self) -> int: ...
    @property
    def length(self) -> int: ...
    @property
    def min_ts(self) -> int: ...
    @property
    def max_ts(self) -> int: ...
    @property
    def crc(self) -> int: ...

def add(
    chunks: dict[tuple[str, int], OpenChunk],
    batches: list[Any],
    all_starts: list[list[int]],
    all_offsets: list[list[int]],
) -> None: ...
