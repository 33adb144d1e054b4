"""The metadata role that keeps who may do what: Kafka's ACLs and the SCRAM credentials added at run time
(``SecurityStore``), and its rows.

Every agent keeps both in memory (agents/security.py) and asks ``security_version`` often, a one-row read:
every transaction that changes an ACL or a credential bumps that version, so a changed number is the only
reason to read the tables again (``load_security``). Part of ``storage.metadata.base``'s roles; the
lost-race rule there holds here too (these writes cannot lose one: they serialise on the version row).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from storage.acl_model import AclBinding, AclFilter


@dataclass(frozen=True, slots=True)
class ScramRow:
    """One user's credential for one mechanism (RFC 5802): what the server keeps, never the password."""

    user: str
    mechanism: str
    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int


@dataclass(frozen=True, slots=True)
class SecurityRows:
    """Every ACL and stored credential as of ``version`` (or newer: see ``load_security``)."""

    version: int
    acls: tuple[AclBinding, ...]
    scram: tuple[ScramRow, ...]


class SecurityStore(Protocol):
    def security_version(self) -> int:
        """The number every change of ACLs or credentials bumps."""
        ...

    def load_security(self) -> SecurityRows:
        """Every ACL and credential. The version is read first: rows committed after it may be included,
        never rows older than it missing, so an agent that reloads when the version moves misses nothing."""
        ...

    def create_acls(self, bindings: Sequence[AclBinding]) -> int:
        """Store the bindings, all or nothing; one that is stored already stays as it is (Kafka's
        CreateAcls succeeds for it). Returns how many were new."""
        ...

    def delete_acls(self, filters: Sequence[AclFilter]) -> list[list[AclBinding]]:
        """Delete every binding matching each filter, in one transaction; the bindings each filter
        deleted, in filter order (a binding two filters match is reported by the first)."""
        ...

    def alter_scram_credentials(
        self, deletions: Sequence[tuple[str, str]], upsertions: Sequence[ScramRow]
    ) -> set[str]:
        """Delete (user, mechanism) credentials and store ``upsertions`` in one transaction, except for a
        user one of whose deletions names a credential that is not stored: nothing of that user changes,
        and the user is returned (Kafka's RESOURCE_NOT_FOUND)."""
        ...
