"""Scrubbing: read every live chunk and check it as a reader would, to find damaged ranges before a
consumer does (``strata scan``).

Each live chunk is read with one ranged GET (memory: one chunk at a time) and checked: its CRC-32C from
the metadata row, every batch's header and CRC, and every record of every batch, compressed batches
decompressed once within the output bound (``storage/records/check.py``). A chunk that fails is a
``Finding``: its range, and why. The caller records findings in the damage log, where the planner leaves
their files out until an operator quarantines them (``strata quarantine``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from storage import fileformat, records
from storage.errors import CodecError, DamagedRange, ObjectNotFound
from storage.metadata.base import CompactionCatalog
from storage.metadata.rows import ChunkRow
from storage.objectstore.base import ObjectStore
from storage.records.check import check_stored


@dataclass(frozen=True, slots=True)
class Finding:
    damaged: DamagedRange
    detail: str


@dataclass(slots=True)
class ScrubResult:
    chunks: int = 0
    bytes: int = 0
    findings: list[Finding] = field(default_factory=list)


def scrub(
    store: ObjectStore,
    metadata: CompactionCatalog,
    topic: str | None = None,
    on_chunk: Callable[[ChunkRow], None] | None = None,
) -> ScrubResult:
    """Check every live chunk (of ``topic``, or of every topic), file by file in creation order."""
    result = ScrubResult()
    for file in metadata.live_files():
        chunks = [fc.chunk for fc in metadata.file_chunks([file.file_id])]
        for chunk in sorted(chunks, key=lambda c: c.position):
            if topic is not None and chunk.topic != topic:
                continue
            detail = _check(store, chunk)
            result.chunks += 1
            result.bytes += chunk.length
            if detail is not None:
                damaged = DamagedRange(
                    chunk.topic, chunk.partition, chunk.base_offset, chunk.last_offset, chunk.object_key
                )
                result.findings.append(Finding(damaged, detail))
            if on_chunk is not None:
                on_chunk(chunk)
    return result


def _check(store: ObjectStore, chunk: ChunkRow) -> str | None:
    """Why the chunk is damaged, or None."""
    try:
        data = store.get_range(chunk.object_key, chunk.position, chunk.position + chunk.length)
        if len(data) != chunk.length:
            return f"the object holds {len(data)} of the chunk's {chunk.length} bytes"
        fileformat.verify_chunk(data, chunk.crc, object_key=chunk.object_key)
        for header, batch in records.iter_batches(data, verify_crc=True):
            check_stored(batch, header, deep=True)
    except ObjectNotFound:
        return "the object is missing"
    except CodecError as exc:
        return exc.message
    return None
