"""The keep/drop rule of compaction, as a pure function (Kafka's ``shouldRetainRecord``).

Inputs for one record of a partition being cleaned:
- ``latest``: the offset the offset map holds for the record's key (-1 if the key is not in the map);
- ``map_end``: the last offset pass 1 put into the map. Records after it were not seen by pass 1 (the map
  filled up, or they are newer than ``min.compaction.lag.ms``), so nothing is known about them: they stay.

A record is removed only when a later record of the same key exists in the log (``latest > offset``), or
when it is a tombstone whose delete horizon has passed and no older value of its key can remain
(``can_drop_tombstones``: the job holds the partition's whole log up to this record, so the older values
are being removed in the same pass). Keyless records are kept: a compacted topic refuses them at produce,
and dropping data whose key cannot be compared would be silent loss.

``retain_mask`` is the same rule over a batch's records at once (numpy columns, as compaction's column
scan gives them); tests hold it to ``should_retain`` record by record.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


def should_retain(
    offset: int,
    key_present: bool,
    tombstone: bool,
    latest: int,
    map_end: int,
    delete_horizon_ms: int | None,
    now_ms: int,
    can_drop_tombstones: bool,
) -> bool:
    if offset > map_end or not key_present:
        return True
    if latest > offset:
        return False  # superseded by a later record of the same key
    # A tombstone goes once it has been visible for delete.retention.ms and its older values are gone.
    horizon_passed = delete_horizon_ms is not None and now_ms >= delete_horizon_ms
    return not (tombstone and can_drop_tombstones and horizon_passed)


def retain_mask(
    offsets: I64,
    keyed: Mask,
    tombstone: Mask,
    latest: I64,
    map_end: int,
    delete_horizon_ms: int | None,
    now_ms: int,
    can_drop_tombstones: bool,
) -> Mask:
    """``should_retain`` for each record of one batch (``delete_horizon_ms`` is the batch's)."""
    unknown = (offsets > map_end) | ~keyed
    horizon_passed = delete_horizon_ms is not None and now_ms >= delete_horizon_ms
    droppable = tombstone & (can_drop_tombstones and horizon_passed)
    mask: Mask = unknown | ((latest <= offsets) & ~droppable)
    return mask
