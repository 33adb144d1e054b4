"""The schema registry's config and mode rows, per subject and global (``SchemaStore``,
storage/metadata/schema_store.py), and the subject lock the registry's writes share.

Config rows are written with no other lock: a registration reads them under its subject's lock but a
config change racing it is not serialised with it (Confluent does not either). A mode change is: the mode
decides whether a registration may happen at all, and IMPORT may be entered only while the scope has no
live version, so ``set_subject_mode`` takes the locks a registration takes (``sql/schemas.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from storage.metadata.schema_store import ConfigRow
from storage.metadata.sql.core import SqlBase, Tx


def subject_key(subject: str | None) -> str:
    """The key of a subject's config and mode rows: the global ones are under ``''``."""
    return "" if subject is None else subject


def config_row(tx: Tx, subject: str | None) -> ConfigRow | None:
    row = tx.one("SELECT compatibility, normalize FROM sr_config WHERE subject = ?", (subject_key(subject),))
    return None if row is None else _config(row[0], row[1])


def mode_value(tx: Tx, subject: str | None) -> str | None:
    row = tx.one("SELECT mode FROM sr_mode WHERE subject = ?", (subject_key(subject),))
    return None if row is None or row[0] is None else str(row[0])


def _config(compatibility: object, normalize: object) -> ConfigRow:
    return ConfigRow(
        compatibility=None if compatibility is None else str(compatibility),
        normalize=None if normalize is None else bool(normalize),
    )


class SchemaConfigQueries(SqlBase):
    def hold_subject(self, tx: Tx, subject: str, now_ms: int) -> None:
        """Lock the subject's row, inserting it first if absent. Rows are never deleted, so the lock always
        finds the row."""
        tx.execute(
            "INSERT INTO sr_subjects (subject, next_version, created_ms) VALUES (?, 1, ?)"
            " ON CONFLICT (subject) DO NOTHING",
            (subject, now_ms),
        )
        tx.all(f"SELECT 1 FROM sr_subjects WHERE subject = ?{self._d.for_update}", (subject,))

    def subject_config(self, subject: str | None) -> ConfigRow | None:
        return self._backend.run(lambda tx: config_row(tx, subject), write=False, what="subject_config")

    def set_subject_config(
        self, subject: str | None, compatibility: str | None, normalize: bool | None
    ) -> ConfigRow:
        now_ms = self._clock.now_ms()

        def work(tx: Tx) -> ConfigRow:
            row = tx.one(
                "INSERT INTO sr_config (subject, compatibility, normalize, updated_ms) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (subject) DO UPDATE SET"
                " compatibility = COALESCE(excluded.compatibility, sr_config.compatibility),"
                " normalize = COALESCE(excluded.normalize, sr_config.normalize),"
                " updated_ms = excluded.updated_ms"
                " RETURNING compatibility, normalize",
                (subject_key(subject), compatibility, normalize, now_ms),
            )
            return ConfigRow(None, None) if row is None else _config(row[0], row[1])

        return self._backend.run(work, write=True, what="set_subject_config")

    def delete_subject_config(self, subject: str | None) -> ConfigRow | None:
        row = self._backend.run(
            lambda tx: tx.one(
                "DELETE FROM sr_config WHERE subject = ? RETURNING compatibility, normalize",
                (subject_key(subject),),
            ),
            write=True,
            what="delete_subject_config",
        )
        return None if row is None else _config(row[0], row[1])

    def subject_mode(self, subject: str | None) -> str | None:
        return self._backend.run(lambda tx: mode_value(tx, subject), write=False, what="subject_mode")

    def set_subject_mode(
        self, subject: str | None, mode: str, check: Callable[[str | None, bool], None] | None = None
    ) -> None:
        now_ms = self._clock.now_ms()

        def work(tx: Tx) -> None:
            if subject is None:
                tx.all(f"SELECT 1 FROM sr_mode WHERE subject = ''{self._d.for_update}")
                live = tx.one("SELECT 1 FROM sr_versions WHERE NOT deleted LIMIT 1")
            else:
                tx.all(f"SELECT 1 FROM sr_mode WHERE subject = ''{self._d.for_key_share}")
                self.hold_subject(tx, subject, now_ms)
                live = tx.one(
                    "SELECT 1 FROM sr_versions WHERE subject = ? AND NOT deleted LIMIT 1", (subject,)
                )
            if check is not None:
                check(mode_value(tx, subject), live is not None)
            tx.execute(
                "INSERT INTO sr_mode (subject, mode, updated_ms) VALUES (?, ?, ?)"
                " ON CONFLICT (subject) DO UPDATE SET mode = excluded.mode, updated_ms = excluded.updated_ms",
                (subject_key(subject), mode, now_ms),
            )

        self._backend.run(work, write=True, what="set_subject_mode")

    def delete_subject_mode(self, subject: str | None) -> str | None:
        now_ms = self._clock.now_ms()

        def work(tx: Tx) -> str | None:
            if subject is None:
                # The global row stays (registrations lock it, see sql/schemas.py); NULL is "not set".
                row = tx.one(f"SELECT mode FROM sr_mode WHERE subject = ''{self._d.for_update}")
                tx.execute("UPDATE sr_mode SET mode = NULL, updated_ms = ? WHERE subject = ''", (now_ms,))
            else:
                row = tx.one("DELETE FROM sr_mode WHERE subject = ? RETURNING mode", (subject,))
            return None if row is None or row[0] is None else str(row[0])

        return self._backend.run(work, write=True, what="delete_subject_mode")
