"""Transactions in a clean job (a compacted partition's deduplication), as Kafka's cleaner treats them:
- it never cleans at or past the last stable offset: a record of an open transaction must not shadow an
  older value of its key, since the transaction may abort (pass 1 stops its map before the LSO, and pass
  2 keeps everything past the map);
- an aborted transaction's batches never enter the offset map, so an aborted write never removes a
  committed value, and pass 2 drops them (their offsets become holes).
Merge jobs (delete-policy topics) copy batches as stored, aborted ones included, as Kafka keeps them for
read_uncommitted readers. Markers are metadata rows (storage/records/control.py): no job sees them.

Why reading these once, when the job starts, is safe: the LSO is read first and the aborted ranges after
it, so every aborted range below the LSO is known (a transaction's end writes its range in the metadata
transaction that moves the LSO past it); what lies at or past the LSO is kept as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from storage.metadata.base import CompactionCatalog
from storage.metadata.txn_state import AbortedTxn
from storage.records import BatchHeader
from storage.records.codec import TRANSACTIONAL


@dataclass(frozen=True, slots=True)
class TxnFilter:
    """A partition's last stable offset and its aborted ranges, by producer id."""

    stable: int
    aborted: dict[int, list[tuple[int, int]]] = field(default_factory=dict)

    @classmethod
    def load(cls, metadata: CompactionCatalog, topic: str, partition: int) -> TxnFilter:
        state = metadata.partition_state(topic, partition)
        if state.last_marker_offset < 0:
            return cls(state.last_stable_offset)  # no transaction ever ended here: nothing aborted
        return cls.of(
            state.last_stable_offset, metadata.aborted_txns(topic, partition, 0, state.high_watermark)
        )

    @classmethod
    def of(cls, stable: int, ranges: Sequence[AbortedTxn]) -> TxnFilter:
        aborted: dict[int, list[tuple[int, int]]] = {}
        for a in ranges:
            aborted.setdefault(a.producer_id, []).append((a.first_offset, a.last_offset))
        return cls(stable, aborted)

    def aborted_batch(self, header: BatchHeader, base: int) -> bool:
        """Whether the batch (absolute base offset ``base``) belongs to an aborted transaction."""
        ranges = self.aborted.get(header.producer_id) if header.attributes & TRANSACTIONAL else None
        return ranges is not None and any(first <= base <= last for first, last in ranges)
