"""Where the lake writer's commit can be watched or interrupted: a ``CommitHook``.

pyiceberg writes Parquet and manifests through its own FileIO (pyarrow), not through Strata's
``ObjectStore``, so the object store's fault injection cannot reach between the upload and the catalog
commit. The writer calls the hook there instead: ``before_commit`` once the data files of a snapshot are
written and before the catalog's compare-and-set, ``after_commit`` once it has succeeded. For a state
table (``state_writer``), whose copy-on-write writes its files within the commit, ``before_commit`` comes
before both, once the records are read. A hook that
raises makes the run fail at that point, which is how the tests produce a crash between the two steps, or a
commit whose success the writer never learns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyiceberg.table import Table


class CommitHook(Protocol):
    def before_commit(self, topic: str, table: Table) -> None:
        """The snapshot's files are written; the catalog does not name them yet."""
        ...

    def after_commit(self, topic: str, table: Table) -> None:
        """The catalog names the new snapshot (``table`` is the table as committed)."""
        ...


class NoHook:
    def before_commit(self, topic: str, table: Table) -> None:
        pass

    def after_commit(self, topic: str, table: Table) -> None:
        pass
