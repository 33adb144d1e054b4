"""The files rows as garbage collection sees them: ``FileCatalog``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from storage.metadata.rows import FILE_OBSOLETE, FileRow, FileState
from storage.metadata.sql.core import FILE_COLUMNS, SqlBase, Tx, batches, file_row, in_list


class FileQueries(SqlBase):
    def known_object_keys(self, keys: Sequence[str]) -> set[str]:
        distinct = sorted(set(keys))

        def work(tx: Tx) -> set[str]:
            known: set[str] = set()
            for batch in batches(distinct):
                rows = tx.all(
                    f"SELECT object_key FROM files WHERE object_key IN {in_list(len(batch))}", batch
                )
                known.update(str(r[0]) for r in rows)
            return known

        return self._backend.run(work, write=False, what="known_object_keys")

    def file_states(self, keys: Iterable[str]) -> dict[str, FileState]:
        distinct = sorted(set(keys))

        def work(tx: Tx) -> dict[str, FileState]:
            states: dict[str, FileState] = {}
            for batch in batches(distinct):
                for key, state, since in tx.all(
                    "SELECT object_key, state, obsolete_since_ms FROM files"
                    f" WHERE object_key IN {in_list(len(batch))}",
                    batch,
                ):
                    states[str(key)] = FileState(str(state), None if since is None else int(since))
            return states

        return self._backend.run(work, write=False, what="file_states")

    def obsolete_files(self, before_ms: int, limit: int) -> list[FileRow]:
        if limit <= 0:
            return []
        rows = self._backend.run(
            lambda tx: tx.all(
                f"SELECT {FILE_COLUMNS} FROM files f"
                " WHERE f.state = ? AND f.obsolete_since_ms <= ?"
                " AND NOT EXISTS (SELECT 1 FROM job_files j WHERE j.file_id = f.file_id)"
                " ORDER BY f.obsolete_since_ms, f.file_id LIMIT ?",
                (FILE_OBSOLETE, before_ms, limit),
            ),
            write=False,
            what="obsolete_files",
        )
        return [file_row(r) for r in rows]

    def forget_files(self, file_ids: Sequence[int]) -> None:
        ids = sorted(set(file_ids))

        def work(tx: Tx) -> None:
            # Lock first, then decide in a later statement: under READ COMMITTED that statement sees every
            # transaction that held one of these rows before us (a claim, a chunk insert) as committed.
            for batch in batches(ids):
                tx.all(
                    f"SELECT file_id FROM files WHERE file_id IN {in_list(len(batch))}"
                    f" ORDER BY file_id{self._d.for_update}",
                    batch,
                )
            for batch in batches(ids):
                tx.execute(
                    f"DELETE FROM files WHERE file_id IN {in_list(len(batch))} AND state = ?"
                    " AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.file_id = files.file_id)"
                    " AND NOT EXISTS (SELECT 1 FROM job_files j WHERE j.file_id = files.file_id)",
                    (*batch, FILE_OBSOLETE),
                )

        self._backend.run(work, write=True, what="forget_files")
