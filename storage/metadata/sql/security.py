"""ACLs and SCRAM credentials: the ``SecurityStore`` role (storage/metadata/security.py).

Every write transaction here takes the one ``security_version`` row first (the lock order in ``core``),
so such writes serialise, and bumps it when it changed a row: that is how every agent learns to reload.
Bytes (salts, keys) are stored as base64 text, which both dialects hold the same way.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from storage.acl_model import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from storage.metadata.security import ScramRow, SecurityRows
from storage.metadata.sql.core import Row, SqlBase, Tx

_ACL_COLUMNS = "resource_type, resource_name, pattern_type, principal, host, operation, permission"


def _acl_values(b: AclBinding) -> tuple[str, str, str, str, str, str, str]:
    return (
        b.resource_type.name,
        b.resource_name,
        b.pattern_type.name,
        b.principal,
        b.host,
        b.operation.name,
        b.permission.name,
    )


def _acl(r: Row) -> AclBinding:
    return AclBinding(
        resource_type=ResourceType[str(r[0])],
        resource_name=str(r[1]),
        pattern_type=PatternType[str(r[2])],
        principal=str(r[3]),
        host=str(r[4]),
        operation=Operation[str(r[5])],
        permission=Permission[str(r[6])],
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _scram(r: Row) -> ScramRow:
    return ScramRow(
        user=str(r[0]),
        mechanism=str(r[1]),
        salt=base64.b64decode(str(r[2])),
        stored_key=base64.b64decode(str(r[3])),
        server_key=base64.b64decode(str(r[4])),
        iterations=int(r[5]),
    )


class SecurityQueries(SqlBase):
    def security_version(self) -> int:
        row = self._backend.run(
            lambda tx: tx.one("SELECT version FROM security_version WHERE id = 1"),
            write=False,
            what="security_version",
        )
        return int(row[0]) if row is not None else 0

    def load_security(self) -> SecurityRows:
        def work(tx: Tx) -> SecurityRows:
            # The version first: a change committed between these reads is then seen again at the next
            # poll, rather than hidden behind a version that already counts it.
            row = tx.one("SELECT version FROM security_version WHERE id = 1")
            acls = tx.all(f"SELECT {_ACL_COLUMNS} FROM acls")
            scram = tx.all(
                "SELECT user_name, mechanism, salt, stored_key, server_key, iterations FROM scram_credentials"
            )
            return SecurityRows(
                int(row[0]) if row is not None else 0,
                tuple(sorted(_acl(r) for r in acls)),
                tuple(_scram(r) for r in scram),
            )

        return self._backend.run(work, write=False, what="load_security")

    def _lock_version(self, tx: Tx) -> None:
        tx.all(f"SELECT version FROM security_version WHERE id = 1{self._d.for_update}")

    @staticmethod
    def _bump(tx: Tx) -> None:
        tx.execute("UPDATE security_version SET version = version + 1 WHERE id = 1")

    def create_acls(self, bindings: Sequence[AclBinding]) -> int:
        def work(tx: Tx) -> int:
            self._lock_version(tx)
            added = 0
            for binding in sorted(set(bindings)):
                added += tx.execute(
                    f"INSERT INTO acls ({_ACL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    _acl_values(binding),
                )
            if added:
                self._bump(tx)
            return added

        return self._backend.run(work, write=True, what="create_acls")

    def delete_acls(self, filters: Sequence[AclFilter]) -> list[list[AclBinding]]:
        def work(tx: Tx) -> list[list[AclBinding]]:
            self._lock_version(tx)
            stored = sorted(_acl(r) for r in tx.all(f"SELECT {_ACL_COLUMNS} FROM acls"))
            taken: set[AclBinding] = set()
            out: list[list[AclBinding]] = []
            for f in filters:
                matched = [b for b in stored if b not in taken and f.matches(b)]
                taken.update(matched)
                out.append(matched)
            for binding in sorted(taken):
                tx.execute(
                    "DELETE FROM acls WHERE resource_type = ? AND resource_name = ? AND pattern_type = ?"
                    " AND principal = ? AND host = ? AND operation = ? AND permission = ?",
                    _acl_values(binding),
                )
            if taken:
                self._bump(tx)
            return out

        return self._backend.run(work, write=True, what="delete_acls")

    def alter_scram_credentials(
        self, deletions: Sequence[tuple[str, str]], upsertions: Sequence[ScramRow]
    ) -> set[str]:
        def work(tx: Tx) -> set[str]:
            self._lock_version(tx)
            stored = {
                (str(r[0]), str(r[1])) for r in tx.all("SELECT user_name, mechanism FROM scram_credentials")
            }
            missing = {user for user, mechanism in deletions if (user, mechanism) not in stored}
            changed = 0
            for user, mechanism in deletions:
                if user not in missing:
                    changed += tx.execute(
                        "DELETE FROM scram_credentials WHERE user_name = ? AND mechanism = ?",
                        (user, mechanism),
                    )
            for row in upsertions:
                if row.user in missing:
                    continue
                changed += tx.execute(
                    "INSERT INTO scram_credentials"
                    " (user_name, mechanism, salt, stored_key, server_key, iterations)"
                    " VALUES (?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (user_name, mechanism) DO UPDATE SET salt = excluded.salt,"
                    " stored_key = excluded.stored_key, server_key = excluded.server_key,"
                    " iterations = excluded.iterations",
                    (
                        row.user,
                        row.mechanism,
                        _b64(row.salt),
                        _b64(row.stored_key),
                        _b64(row.server_key),
                        row.iterations,
                    ),
                )
            if changed:
                self._bump(tx)
            return missing

        return self._backend.run(work, write=True, what="alter_scram_credentials")
