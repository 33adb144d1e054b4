"""Which offsets a produce request asks for, and the answer, held per batch rather than per record.

A front door names the records whose offsets it wants back as an *order*: (batch index, record index within
that batch) pairs, in the order it will answer. HTTP asks for every record of a request, Kafka only for
each partition's first record (its batches carry their own relative offsets).

Byte layout of an order (``bytes``): ``2 * n`` native-endian int32 values, ``b0, r0, b1, r1, ...``, the
pairs' batch and record indices. It is what the HTTP door's C encoder (agents/_encode.c) writes, so an
HTTP request's order costs no Python object per record.

The answer, ``RecordOffsets``, keeps the order and one (partition, base offset) per batch: record r of
batch b sits at offset ``bases[b] + r``. Expanding that into a (partition, offset) pair per record is left
to whoever reads it: the HTTP door renders its JSON answer straight from this form in C
(api/_recordjson.c, ``render_offsets``). Before this form existed, building a placement tuple, a pair and
a dict per record in Python was a large share of the agent's CPU under HTTP produce load (py-spy,
docs/benchmarks.md).
"""

from __future__ import annotations

import array
import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

Order = bytes

# One (batch index, record index) pair of an order, native-endian as the order's layout above.
_PAIR = struct.Struct("=ii")


def order_of(pairs: Iterable[tuple[int, int]]) -> Order:
    """Pack (batch index, record index) pairs as an order."""
    packed = array.array("i")
    for batch, record in pairs:
        packed.append(batch)
        packed.append(record)
    return packed.tobytes()


def order_pairs(order: Order) -> list[tuple[int, int]]:
    """The (batch index, record index) pairs an order holds."""
    flat = memoryview(order).cast("i").tolist()
    return list(zip(flat[::2], flat[1::2], strict=True))


# The order of a Kafka produce request's partition: its first batch's first record.
FIRST_RECORD: Order = order_of([(0, 0)])


class RecordOffsets(Sequence[tuple[int, int]]):
    """(partition, offset) of each record an order names, in its order; stored per batch.

    Invariant: every batch index in ``order`` is below ``len(partitions) == len(bases)``. ``log_starts``,
    when known, is aligned with ``bases``: each batch's partition's log start offset at its commit (the
    Kafka door answers it).
    """

    __slots__ = ("bases", "log_starts", "order", "partitions")

    def __init__(
        self, partitions: list[int], bases: list[int], order: Order, log_starts: list[int] | None = None
    ) -> None:
        self.partitions = partitions
        self.bases = bases
        self.order = order
        self.log_starts = log_starts

    @classmethod
    def of_pairs(cls, pairs: Sequence[tuple[int, int]]) -> RecordOffsets:
        """The answer given as (partition, offset) pairs: each its own one-record batch."""
        return cls([p for p, _ in pairs], [o for _, o in pairs], order_of((i, 0) for i in range(len(pairs))))

    def __len__(self) -> int:
        return len(self.order) // 8

    @overload
    def __getitem__(self, index: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, index: slice) -> list[tuple[int, int]]: ...
    def __getitem__(self, index: int | slice) -> tuple[int, int] | list[tuple[int, int]]:
        if isinstance(index, slice):
            return self.pairs()[index]
        n = len(self.order) // 8
        if not -n <= index < n:
            raise IndexError("RecordOffsets index out of range")
        # One pair read, not the whole answer expanded (the Kafka door reads each partition's first).
        batch, record = _PAIR.unpack_from(self.order, 8 * (index % n))
        return self.partitions[batch], self.bases[batch] + record

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(self.pairs())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RecordOffsets | list | tuple):
            return self.pairs() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable lists inside, like a list

    def __repr__(self) -> str:
        return f"RecordOffsets({self.pairs()!r})"

    def pairs(self) -> list[tuple[int, int]]:
        partitions, bases = self.partitions, self.bases
        return [(partitions[b], bases[b] + r) for b, r in order_pairs(self.order)]


__all__ = ["FIRST_RECORD", "Order", "RecordOffsets", "order_of", "order_pairs"]
