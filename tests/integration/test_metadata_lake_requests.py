"""A commit asked for (``LakeStore.request_lake_commit``, set by ``POST /v1/topics/{topic}/lake/commit-now``),
on SQLite and PostgreSQL: it stands until a run that began after it learns the table's offsets (a commit,
or nothing to commit), and survives a failed run, so the next round tries again."""

from __future__ import annotations

from dataclasses import replace

import pytest

from storage.metadata import MetadataStore
from storage.metadata.lake_state import LakeClaim, LakeRunResult

pytestmark = pytest.mark.integration

NOW = 1_700_000_000_000
LEASE = 30_000
CLAIM = LakeClaim("orders", "strata.orders", "raw", True, NOW - 1000)


def _run(store: MetadataStore, at: int, result: LakeRunResult, asked_meanwhile: bool = False) -> bool:
    """A leased run ending with ``result`` (as the writer makes it: ``request_seen`` from the leased row;
    ``asked_meanwhile``: a commit is asked for while it runs): whether one is still asked for after it."""
    leased = store.lease_lake_table(CLAIM, "w1", at, LEASE)
    assert leased is not None
    if asked_meanwhile:
        assert store.request_lake_commit("orders")
    store.finish_lake_run("orders", "w1", at + 1, replace(result, request_seen=leased.commit_requested))
    (row,) = store.lake_tables()
    return row.commit_requested


def test_a_request_stands_until_a_run_learns_the_offsets(metadata_store: MetadataStore) -> None:
    store = metadata_store
    assert not store.request_lake_commit("orders")  # no row yet: the first round runs the topic anyway
    assert not _run(store, NOW, LakeRunResult({0: 3}, 1, NOW, 0, None))
    assert store.request_lake_commit("orders")
    assert _run(store, NOW + 10, LakeRunResult(None, None, None, 2, "boom"))  # failed: still asked for
    assert not _run(store, NOW + 20, LakeRunResult({0: 3}, 1, None, 0, None))  # nothing new: done
    assert store.request_lake_commit("orders")
    assert not _run(store, NOW + 30, LakeRunResult({0: 5}, 2, NOW + 30, 0, None))  # committed: done
    # Asked for while a run was in flight: that run may have read the topic before, so the next one answers.
    assert _run(store, NOW + 40, LakeRunResult({0: 5}, 2, NOW + 40, 0, None), asked_meanwhile=True)
    assert not _run(store, NOW + 50, LakeRunResult({0: 6}, 3, NOW + 50, 0, None))
