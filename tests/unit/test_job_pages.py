"""The job list's paging under permissions (api/routes/compaction.py ``_page_of_jobs``), against a fake
listing: pages fill up from older jobs past the ones the caller may not see, the cursor is None exactly
when every job was examined, and a page never scans more than ``MAX_JOB_SCANS`` listings."""

from __future__ import annotations

from typing import cast

import pytest

from api.routes.compaction import MAX_JOB_SCANS, _page_of_jobs
from storage.metadata.base import StatsReader
from storage.metadata.rows import JOB_DONE, Job


class FakeJobs:
    """``list_jobs`` over jobs 1..n (each touching one topic), counting the calls."""

    def __init__(self, topics: list[str]) -> None:
        self.jobs = [
            Job(i + 1, "merge", {}, JOB_DONE, None, None, 1, 0, 0, partitions=((t, 0),))
            for i, t in enumerate(topics)
        ]
        self.calls = 0

    def list_jobs(
        self, state: str | None = None, topic: str | None = None, before: int | None = None, limit: int = 50
    ) -> list[Job]:
        self.calls += 1
        bound = before if before is not None else 2**63
        return [j for j in reversed(self.jobs) if j.job_id < bound][:limit]


def page(
    fake: FakeJobs, limit: int, before: int | None = None, hidden: str = "x"
) -> tuple[list[int], int | None]:
    jobs, cursor = _page_of_jobs(
        cast(StatsReader, fake), lambda j: hidden not in j.topics, None, None, before, limit
    )
    return [j.job_id for j in jobs], cursor


def test_pages_walk_every_visible_job_once() -> None:
    fake = FakeJobs(["a", "x", "a", "a", "x", "x", "a"])  # job ids 1..7; 2, 5 and 6 are hidden
    seen: list[int] = []
    cursor: int | None = None
    while True:
        ids, cursor = page(fake, 2, cursor)
        seen += ids
        if cursor is None:
            break
    assert seen == [7, 4, 3, 1]


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (1, ([7], 7)),
        (3, ([7, 4, 3], 3)),  # job 2 is left, hidden or not: the cursor says where to go on
        (4, ([7, 4, 3, 1], None)),
        (5, ([7, 4, 3, 1], None)),
    ],
)
def test_the_cursor_is_none_exactly_at_the_end(limit: int, expected: tuple[list[int], int | None]) -> None:
    assert page(FakeJobs(["a", "x", "a", "a", "x", "x", "a"]), limit) == expected


def test_a_page_of_hidden_jobs_stops_after_max_scans_with_a_cursor() -> None:
    fake = FakeJobs(["a"] + ["x"] * 100)
    ids, cursor = page(fake, 2)
    assert (ids, fake.calls) == ([], MAX_JOB_SCANS)
    assert cursor == 101 - 3 * MAX_JOB_SCANS + 1  # each listing examined 3 jobs (a page and one more)
    ids, cursor = page(fake, 50, cursor)
    assert (ids, cursor) == ([1], None)
    assert page(FakeJobs([]), 3) == ([], None)
