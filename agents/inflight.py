"""Idempotent producer appends this agent is still flushing, so that a resend waits for the original.

A Kafka producer resends a batch (same producer id, epoch and sequence) when it gave up waiting or lost
its connection, often while the first copy is still in this agent's buffer or flush. Committing the copy
would only find a duplicate at commit time: within the same flush it cannot be answered yet (the original
has no offset) and in a later one it costs a second upload. So a resend of an append in flight here
follows the original's outcome instead of entering the buffer. Only the commit decides what is a
duplicate of a committed batch; this map only knows this agent's uncommitted ones.
"""

from __future__ import annotations

import asyncio

from agents.buffer import ProduceRequest
from agents.offsets import Order, RecordOffsets
from storage.errors import Unavailable

# (topic, partition, producer id, epoch, first sequence, record count, the offsets asked for)
AppendKey = tuple[str, int, int, int, int, int, Order]


def append_key(request: ProduceRequest) -> AppendKey | None:
    """The identity of an idempotent producer's append: one partition's batches, all with a producer id."""
    batches = request.batches
    if not batches or batches[0].producer_id < 0:
        return None
    first = batches[0]
    for batch in batches:
        if batch.producer_id != first.producer_id or (batch.topic, batch.partition) != (
            first.topic,
            first.partition,
        ):
            return None
    return (
        first.topic,
        first.partition,
        first.producer_id,
        first.producer_epoch,
        first.base_sequence,
        first.record_count if len(batches) == 1 else sum(b.record_count for b in batches),
        request.order,
    )


class InflightAppends:
    def __init__(self) -> None:
        self._futures: dict[AppendKey, asyncio.Future[RecordOffsets]] = {}

    def follow(self, key: AppendKey) -> asyncio.Future[RecordOffsets] | None:
        """A future with the outcome of the in-flight append ``key``, or None if there is none."""
        original = self._futures.get(key)
        if original is None:
            return None
        follower: asyncio.Future[RecordOffsets] = asyncio.get_running_loop().create_future()

        def copy(done: asyncio.Future[RecordOffsets]) -> None:
            if follower.done():
                return
            if done.cancelled():
                follower.set_exception(Unavailable("the original request was cancelled"))
            elif (exc := done.exception()) is not None:
                follower.set_exception(exc)
            else:
                follower.set_result(done.result())

        original.add_done_callback(copy)
        return follower

    def track(self, key: AppendKey, future: asyncio.Future[RecordOffsets]) -> None:
        self._futures[key] = future

        def forget(_: asyncio.Future[RecordOffsets]) -> None:
            if self._futures.get(key) is future:
                del self._futures[key]

        future.add_done_callback(forget)
