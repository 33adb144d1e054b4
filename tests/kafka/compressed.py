"""Helpers for the compressed-batch tests: what is stored for a partition, read as a reader would."""

from __future__ import annotations

from storage import records
from strata.runtime import Runtime


def stored_batches(runtime: Runtime, topic: str, partition: int) -> list[tuple[records.BatchHeader, bytes]]:
    """Every batch of the partition's live chunks, as stored (base offsets relative to their chunk)."""
    out: list[tuple[records.BatchHeader, bytes]] = []
    for chunk in runtime.metadata.find_chunks(topic, partition, 0, 10_000):
        data = runtime.store.get_range(chunk.object_key, chunk.position, chunk.position + chunk.length)
        out += [(header, bytes(view)) for header, view in records.iter_batches(data)]
    return out


def stored_codecs(runtime: Runtime, topic: str, partitions: int) -> list[int]:
    """The codec of every stored batch of the topic, partition by partition."""
    return [h.attributes & 0x07 for p in range(partitions) for h, _ in stored_batches(runtime, topic, p)]
