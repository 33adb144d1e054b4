"""The table properties every lake table carries (the topic's table and its state table alike): which topic
it holds, and no commit retry.

Which topic: its name and when it was created. A topic deleted and created again under the same name is
another topic, whose offsets start again at 0, so a writer refuses a table that names another incarnation
rather than mixing the two.

No commit retry: pyiceberg 0.12 retries a failed commit by re-applying the transaction's changes on top of
the snapshot that won, which would append (or, for a state table, rewrite from stale rows) what the winner
already wrote. A lake table's commit must instead fail and the writer stop: ``commit.retry.num-retries=0``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from storage.errors import StrataError
from storage.metadata.rows import TopicInfo

if TYPE_CHECKING:
    from pyiceberg.table import Table

NO_RETRY = {"commit.retry.num-retries": "0"}
TOPIC_PROPERTY = "strata.topic"
TOPIC_CREATED_PROPERTY = "strata.topic-created-ms"


def new_table_properties(info: TopicInfo) -> dict[str, str]:
    """The properties a lake table of ``info`` is created with."""
    return {
        **NO_RETRY,
        "format-version": "2",
        TOPIC_PROPERTY: info.name,
        TOPIC_CREATED_PROPERTY: str(info.created_ms),
    }


def check_topic(table: Table, identifier: str, info: TopicInfo) -> None:
    """Raises StrataError when ``table`` holds another topic (another name, or an earlier topic of the
    same name). A table without the properties (made by another tool) is taken as the topic's."""
    owner = table.properties.get(TOPIC_PROPERTY, info.name)
    created = table.properties.get(TOPIC_CREATED_PROPERTY, str(info.created_ms))
    if (owner, created) != (info.name, str(info.created_ms)):
        raise StrataError(
            f"the Iceberg table {identifier} holds topic {owner!r} as created at {created} ms, not"
            f" {info.name!r} as created at {info.created_ms} ms: drop the table, or set"
            " strata.iceberg.table to another name"
        )


def ensure_no_retry(table: Table) -> Table:
    """``table`` with ``commit.retry.num-retries=0``, set now if it lacks it."""
    if any(table.properties.get(k) != v for k, v in NO_RETRY.items()):
        with table.transaction() as transaction:
            transaction.set_properties(NO_RETRY)
        table.refresh()
    return table
