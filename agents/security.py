"""Who is asking and whether they may: the principals file, the SCRAM credentials and ACLs stored in the
metadata store, and the decisions both front doors ask of them.

Each agent holds the stored ACLs and credentials in memory (one immutable ``_Snapshot``, swapped whole),
so a per-request check or a SCRAM exchange costs no query. ``keep_fresh`` reads the store's security
version every ``refresh_ms`` (one row) and reloads both tables when it moved: a change made through any
agent is in force on every agent within ``refresh_ms`` plus one reload. The agent that made a change
reloads at once (``refresh``), so its own client sees it on its next request.

Authentication, for both doors:
- a bearer token: the principals file's tokens and STRATA_API_TOKENS (HTTP only);
- a name and password (SASL/PLAIN, HTTP Basic): the file's password, or a stored SCRAM credential, checked
  by salting the password again (agents/scram.py); a success is remembered for the snapshot's life so
  that a client sending Basic on every request costs one PBKDF2, not one per request;
- SASL/SCRAM: the stored credential of (user, mechanism) if there is one, else the file's, else a made-up
  one that no password matches (so an unknown name fails at the proof like a wrong password).
Authorization is agents/acl.py's over the snapshot's ACLs; a principal of the file with ``superuser``
(and STRATA_API_TOKENS' principal) is a Kafka super user.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from agents.acl import Acls, Request
from agents.permissions import Name, Need
from agents.principals import Principal, Principals
from agents.scram import SCRAM_MECHANISMS, ScramCredential, password_matches
from storage.acl_model import CLUSTER_NAME, AclBinding, Operation, ResourceType
from storage.clock import Clock
from storage.errors import (
    ClusterForbidden,
    Forbidden,
    GroupForbidden,
    StrataError,
    TransactionalIdForbidden,
)
from storage.metadata.security import SecurityStore

log = logging.getLogger("strata.security")

# How often an agent asks the store whether ACLs or credentials changed (--security-refresh-ms default).
REFRESH_MS = 1000
# Remembered password checks per snapshot (successes only).
VERIFIED_ENTRIES = 4096


@dataclass(frozen=True, slots=True)
class _Snapshot:
    version: int
    acls: Acls
    scram: Mapping[tuple[str, str], ScramCredential]  # (user, mechanism)
    # hmac(secret, name NUL password) of recent successful password checks against ``scram``.
    verified: dict[bytes, str] = field(default_factory=dict)


def client_host(address: str) -> str:
    """A client's address as ACL hosts name it: Kafka's ``/127.0.0.1`` without its slash."""
    return address.lstrip("/")


class Security:
    def __init__(self, principals: Principals, store: SecurityStore, *, refresh_ms: int = REFRESH_MS) -> None:
        self.principals = principals
        self.refresh_ms = refresh_ms
        self._store = store
        self._snapshot = _Snapshot(-1, Acls(), {})
        self._secret = os.urandom(32)

    # --- keeping the snapshot fresh -----------------------------------------------------------------

    def seed(self) -> int:
        """Store the principals file's grants as ACLs (those already stored stay); how many were new."""
        acls = self.principals.file_acls()
        return self._store.create_acls(acls) if acls else 0

    def refresh(self) -> bool:
        """Reload if the stored version moved; whether it did. Unavailable if the store does not answer."""
        version = self._store.security_version()
        if version == self._snapshot.version:
            return False
        rows = self._store.load_security()
        scram = {
            (r.user, r.mechanism): ScramCredential(r.salt, r.stored_key, r.server_key, r.iterations)
            for r in rows.scram
        }
        self._snapshot = _Snapshot(rows.version, Acls(rows.acls), scram)
        return True

    async def keep_fresh(self, clock: Clock) -> None:
        """Refresh every ``refresh_ms`` until cancelled; a store that does not answer keeps the last
        snapshot (logged) and is asked again next time."""
        while True:
            await clock.asleep(self.refresh_ms / 1000)
            try:
                if await asyncio.to_thread(self.refresh):
                    log.info("ACLs and SCRAM credentials reloaded (version %d)", self._snapshot.version)
            except StrataError as exc:
                log.warning("could not check for ACL or credential changes: %s", exc.message)

    @property
    def version(self) -> int:
        return self._snapshot.version

    @property
    def acls(self) -> tuple[AclBinding, ...]:
        return self._snapshot.acls.bindings

    def scram_users(self) -> dict[str, dict[str, int]]:
        """Stored SCRAM users: name -> mechanism -> iterations."""
        out: dict[str, dict[str, int]] = {}
        for (user, mechanism), credential in sorted(self._snapshot.scram.items()):
            out.setdefault(user, {})[mechanism] = credential.iterations
        return out

    # --- authentication ------------------------------------------------------------------------------

    def principal_named(self, name: str) -> Principal | None:
        """The file's principal of that name, else a principal for a stored SCRAM user, else None."""
        found = self.principals.get(name)
        if found is not None:
            return found
        if any((name, m) in self._snapshot.scram for m in SCRAM_MECHANISMS):
            return Principal(name)
        return None

    def by_token(self, token: str) -> Principal | None:
        return self.principals.by_token(token)

    def by_password(self, name: str, password: str) -> Principal | None:
        found = self.principals.by_password(name, password)
        if found is not None:
            return found
        snapshot = self._snapshot
        key = hmac.new(self._secret, f"{name}\0{password}".encode(), hashlib.sha256).digest()
        if snapshot.verified.get(key) == name:
            return self.principal_named(name)
        stored = [(m, snapshot.scram[(name, m)]) for m in SCRAM_MECHANISMS if (name, m) in snapshot.scram]
        if not stored:
            # As long as a stored user's check takes, so the time does not tell which names exist.
            made_up = self.principals.made_up_credential(SCRAM_MECHANISMS[0], name)
            password_matches(SCRAM_MECHANISMS[0], made_up, password)
            return None
        mechanism, credential = stored[0]
        if not password_matches(mechanism, credential, password):
            return None
        if len(snapshot.verified) >= VERIFIED_ENTRIES:
            snapshot.verified.clear()
        snapshot.verified[key] = name
        return self.principal_named(name)

    def scram_credential(self, mechanism: str, name: str) -> ScramCredential:
        """The credential a SCRAM exchange checks the proof against (see the module docstring)."""
        stored = self._snapshot.scram.get((name, mechanism))
        if stored is not None:
            return stored
        from_file = self.principals.scram_credential(mechanism, name)
        return from_file if from_file is not None else self.principals.made_up_credential(mechanism, name)

    # --- authorization -------------------------------------------------------------------------------

    def allowed(
        self, who: Principal | None, host: str, op: Operation, resource_type: ResourceType, name: str | None
    ) -> bool:
        """Kafka's StandardAuthorizer (agents/acl.py). A null name (the Kafka door decodes them) matches no
        ACL; None for ``who`` is a request that has not authenticated."""
        if who is None:
            return False
        if who.superuser:
            return True
        if name is None:
            return False
        return self._snapshot.acls.allowed(Request(who.acl_principal, host, op, resource_type, name))

    def allowed_on_some(
        self, who: Principal | None, host: str, op: Operation, resource_type: ResourceType
    ) -> bool:
        """Kafka's authorizeByResourceType (KIP-679)."""
        if who is None:
            return False
        return who.superuser or self._snapshot.acls.allowed_on_some(
            who.acl_principal, host, op, resource_type
        )

    def permits(self, who: Principal, host: str, need: Need, name: str | None) -> bool:
        """Whether ``need`` (or its alternative) allows ``who`` on ``name``."""
        if self._permits_one(who, host, need, name):
            return True
        return need.alternative is not None and self._permits_one(who, host, need.alternative, name)

    def _permits_one(self, who: Principal, host: str, need: Need, name: str | None) -> bool:
        if need.name is Name.SOME_TOPIC:
            return self.allowed_on_some(who, host, need.operation, need.resource)
        if need.name is Name.CLUSTER:
            name = CLUSTER_NAME
        return self.allowed(who, host, need.operation, need.resource, name)


# The error of a refused need, by the resource it names: HTTP 403 with its code, and on the Kafka door the
# resource's *_AUTHORIZATION_FAILED (broker/errors.py).
REFUSALS: dict[ResourceType, type[Forbidden]] = {
    ResourceType.TOPIC: Forbidden,
    ResourceType.GROUP: GroupForbidden,
    ResourceType.CLUSTER: ClusterForbidden,
    ResourceType.TRANSACTIONAL_ID: TransactionalIdForbidden,
    ResourceType.SUBJECT: Forbidden,  # the registry answers its own body (api/registry/access.py)
    ResourceType.TABLE: Forbidden,  # the Iceberg catalog answers its own body (api/iceberg/access.py)
}


def permits(
    security: Security | None, who: Principal | None, host: str, need: Need, name: str | None
) -> bool:
    """The check both doors make: a super user (ANYONE, without authentication) passes; a request that has
    not authenticated (None) does not; else the ACLs decide."""
    if who is not None and who.superuser:
        return True
    if security is None or who is None:
        return False
    return security.permits(who, host, need, name)


def refusal(need: Need, who: Principal | None, name: str | None) -> Forbidden:
    """The error for ``who`` lacking ``need`` on ``name``: names the principal and the permission."""
    subject = CLUSTER_NAME if need.name in (Name.CLUSTER, Name.SOME_TOPIC) and name is None else name
    return REFUSALS[need.resource](
        f"principal {who.name if who else '?'!r} may not {need.operation.name} "
        f"{need.resource.name} {subject!r}"
    )
