"""The offsets a lake table holds: the snapshot summary property ``strata.offsets``.

Every snapshot the writer commits carries ``{"<partition>": next_offset, ...}``: the table holds every
record of the topic below ``next_offset`` in each partition it names (from where the table started), and
none at or past it. Data and offsets are in one snapshot, which the catalog swaps in by compare-and-set, so
they can never disagree: that is the exactly-once argument, and why the lake's status table is only a copy.

A snapshot without the property (one made by another tool, or a maintenance rewrite that did not carry it
forward) says nothing about offsets: the writer walks its ancestors to the newest one that has it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from storage.errors import StrataError

if TYPE_CHECKING:
    from pyiceberg.table import Table

OFFSETS_PROPERTY = "strata.offsets"


def encode_offsets(offsets: Mapping[int, int]) -> str:
    return json.dumps({str(p): o for p, o in sorted(offsets.items())}, separators=(",", ":"))


def decode_offsets(text: str) -> dict[int, int]:
    try:
        loaded = json.loads(text)
        if not isinstance(loaded, dict):
            raise TypeError("not an object")
        return {int(p): int(o) for p, o in loaded.items()}
    except (ValueError, TypeError) as exc:
        raise StrataError(
            f"the snapshot property {OFFSETS_PROPERTY} is not partition -> offset: {exc}"
        ) from None


def committed_offsets(table: Table) -> tuple[dict[int, int], int | None]:
    """(partition -> next offset, the id of the snapshot that says so) of ``table``'s current state;
    ({}, None) for a table no writer has committed to."""
    from pyiceberg.table.snapshots import ancestors_of

    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        text = snapshot.summary.get(OFFSETS_PROPERTY) if snapshot.summary is not None else None
        if text is not None:
            return decode_offsets(text), snapshot.snapshot_id
    return {}, None
