"""What a topic's lake holds in the bucket: the objects and bytes under the locations of its tables (the
topic's table, and its ``_dlq`` and ``_state`` tables when they exist), by listing them through Strata's
object store.

A listing is the one exact source: it sees every object, uncommitted uploads and files of expired snapshots
included, which are paid for until maintenance deletes them, and which no table metadata names. It costs a
LIST per 1,000 objects, so it is made where the figure is unknown (a table the round has not measured yet)
and by maintenance, which lists the topic's table anyway (``maintenance.py``); between listings the
figure moves by what the lake writes (``LakeUsage``). Each location is listed with a trailing ``/``, so
``orders`` never counts ``orders_dlq``'s objects.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from storage.lake_catalog import LAKE_PREFIX
from storage.lake_config import dead_letter_table
from storage.objectstore.base import ObjectStore

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog


def companion_tables(table: str) -> tuple[str, str]:
    """The dead-letter and state tables a topic's table ``table`` may have."""
    from pipeline.lake.state_writer import state_table_name

    return dead_letter_table(table), state_table_name(table)


def key_of(warehouse: str, location: str) -> str | None:
    """The object key of a file location under the warehouse (the bucket's ``lake/`` prefix); None for one
    outside it (a table made by another tool: its objects may not be Strata's)."""
    for root in _spellings(warehouse.rstrip("/")):
        if location.startswith(root + "/"):
            return f"{LAKE_PREFIX}/{location[len(root) + 1 :]}"
    return None


def location_prefix(warehouse: str, location: str) -> str | None:
    """The key prefix, ending in ``/``, of the objects of a table at ``location``; None outside."""
    key = key_of(warehouse, location.rstrip("/") + "/x")
    return None if key is None else key[:-1]


def listed(store: ObjectStore, prefix: str) -> tuple[int, int]:
    """(objects, bytes) under ``prefix``."""
    objects = size = 0
    for info in store.list(prefix):
        if info.key.startswith(prefix):
            objects += 1
            size += info.size
    return objects, size


def measure_tables(
    catalog: Catalog, store: ObjectStore, identifiers: Iterable[str]
) -> tuple[int, int] | None:
    """(objects, bytes) under the locations of those of ``identifiers`` that exist; None when one of them
    lies outside the warehouse. Loading a table reads its metadata file (the lake's requests, counted)."""
    from pyiceberg.exceptions import NoSuchTableError

    objects = size = 0
    for identifier in identifiers:
        try:
            table = catalog.load_table(identifier)
        except NoSuchTableError:
            continue
        prefix = location_prefix(catalog.properties["warehouse"], table.location())
        if prefix is None:
            return None
        n, b = listed(store, prefix)
        objects, size = objects + n, size + b
    return objects, size


def _spellings(root: str) -> tuple[str, ...]:
    """A location's root as writers may spell it: ``file:///d`` is also ``file:/d`` (pyarrow's form)."""
    if root.startswith("file:///"):
        return (root, "file:/" + root[len("file:///") :])
    return (root,)
