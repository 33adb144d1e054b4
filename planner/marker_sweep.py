"""Transaction markers in a clean job: Kafka's rule for markers in a compacted partition (its cleaner, with
KIP-534's delete horizon), over markers that are metadata rows (storage/records/control.py).

A marker ends one transaction of its producer in the partition, and every transactional batch of that
producer since its previous marker belongs to that transaction. The clean walks the partition's batches in
offset order from its first one; each transactional batch it keeps any record of is noted against its
producer. At each marker at or below the job's map end (the offsets this clean decides on):
- a record of its transaction is kept: the marker stays as it is;
- none is (an aborted transaction, always; a committed one whose keys were all written again): the marker
  is empty. Without a horizon it gets ``now + delete.retention.ms``; past its horizon it is dropped, with
  its aborted range.

Why a horizon and not at once: a read_committed reader that fetched an aborted transaction's records before
a clean removed them skips that producer's batches until it reads the ABORT marker; were the marker gone, it
would skip the producer's later, committed records too. ``delete.retention.ms`` is the time such a reader
has, as it is for tombstones. Markers past the map end keep their state: not every record of theirs was
decided, and the log's last marker (the offset a consumer's position ends at) is always among them, since
the map ends at a data chunk.

Markers are read a page at a time as the walk reaches them: a partition with many transactions needs no
more memory than one page and the producers of its open stretch.
"""

from __future__ import annotations

from collections import deque

from storage.metadata.base import CompactionCatalog
from storage.metadata.txn_state import TxnMarker

PAGE = 1000


class MarkerSweep:
    def __init__(
        self,
        metadata: CompactionCatalog,
        topic: str,
        partition: int,
        map_end: int,
        now_ms: int,
        delete_retention_ms: int,
    ) -> None:
        self._metadata = metadata
        self._where = (topic, partition)
        self._map_end = map_end
        self._now_ms = now_ms
        self.horizon_ms = now_ms + delete_retention_ms
        self._page: deque[TxnMarker] = deque()
        self._next_from = 0  # the first offset the next page is read from
        self._exhausted = map_end < 0
        self._kept: set[int] = set()  # producers with a kept record since their last marker
        self.horizons: list[int] = []
        self.dropped: list[int] = []

    def reach(self, offset: int) -> None:
        """The walk is at ``offset``: decide every marker before it (at or below the map end)."""
        while True:
            marker = self._peek()
            if marker is None or marker.offset >= offset:
                return
            self._page.popleft()
            self._decide(marker)

    def kept(self, producer_id: int) -> None:
        """A transactional batch of ``producer_id`` keeps at least one record."""
        self._kept.add(producer_id)

    def finish(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Decide the markers after the last batch, up to the map end: (new horizons, dropped)."""
        self.reach(self._map_end + 1)
        return tuple(self.horizons), tuple(self.dropped)

    def _decide(self, marker: TxnMarker) -> None:
        if marker.producer_id in self._kept:
            self._kept.discard(marker.producer_id)
        elif marker.delete_horizon_ms is None:
            self.horizons.append(marker.offset)
        elif marker.delete_horizon_ms <= self._now_ms:
            self.dropped.append(marker.offset)

    def _peek(self) -> TxnMarker | None:
        if not self._page and not self._exhausted:
            topic, partition = self._where
            page = self._metadata.txn_markers(topic, partition, self._next_from, self._map_end, PAGE)
            self._page.extend(page)
            if len(page) < PAGE:
                self._exhausted = True
            else:
                self._next_from = page[-1].offset + 1
        return self._page[0] if self._page else None
