"""Type stubs of the C extension ``broker/_produce.c`` (documented there)."""

from typing import Any, TypeVar

from storage._cbuffer import Buffer

T = TypeVar("T", bound=tuple[Any, ...])

def decode(
    frame: Buffer, topic_type: type[T], partition_type: type[tuple[Any, ...]]
) -> tuple[int, int, str | None, int, int, list[T]]: ...
