"""Adding, replacing and removing stored SCRAM credentials, with Kafka's rules (its controller's
ScramControlManager), for both doors: AlterUserScramCredentials and DescribeUserScramCredentials on the
Kafka door (broker/handlers/scram.py) and the user routes of the HTTP door (api/routes/acls.py).

An alteration names a user and a mechanism; an upsertion carries the salt, iteration count and salted
password (the client salts the password: the server never sees it), from which the stored and server keys
are derived (agents/scram.py). Per user, all or nothing: a user any of whose alterations is wrong (an
unknown mechanism, too few or too many iterations, an empty salt, the same mechanism twice, or removing a
credential the user does not have) gets that error and none of its alterations applied; the other users'
are applied in one transaction. After a change this agent reloads at once; others within their refresh.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from agents.scram import MAX_ITERATIONS, MIN_ITERATIONS, SCRAM_MECHANISMS, from_salted_password
from agents.security import Security
from storage.errors import (
    DuplicateResource,
    StrataError,
    UnacceptableCredential,
    UnknownScramCredential,
    UnsupportedSaslMechanism,
)
from storage.metadata.security import ScramRow, SecurityStore

# Characters a SCRAM user name may not hold here: SCRAM escapes ',' and '=' in names, and HTTP Basic
# splits the name from the password at the first ':'.
_FORBIDDEN = frozenset(",=:")


@dataclass(frozen=True, slots=True)
class Alteration:
    user: str
    mechanism: str  # a SCRAM mechanism name, or what the client sent if it is not one
    # None: a deletion.
    salt: bytes | None = None
    salted_password: bytes | None = None
    iterations: int = 0


def check_user(user: str) -> None:
    if not user:
        raise UnacceptableCredential("username must not be empty")
    if _FORBIDDEN & set(user) or not user.isprintable():
        raise UnacceptableCredential(
            f"user name {user!r} holds a character that cannot be used (',', '=', ':')"
        )


def _problem(a: Alteration) -> StrataError | None:
    try:
        check_user(a.user)
    except UnacceptableCredential as exc:
        return exc
    if a.mechanism not in SCRAM_MECHANISMS:
        return UnsupportedSaslMechanism(f"unknown SCRAM mechanism {a.mechanism!r}")
    if a.salt is None:
        return None
    if a.iterations < MIN_ITERATIONS:
        return UnacceptableCredential(f"too few iterations: {a.iterations} (at least {MIN_ITERATIONS})")
    if a.iterations > MAX_ITERATIONS:
        return UnacceptableCredential(f"too many iterations: {a.iterations} (at most {MAX_ITERATIONS})")
    if not a.salt or not a.salted_password:
        return UnacceptableCredential("the salt and the salted password must not be empty")
    return None


def alter(store: SecurityStore, alterations: Sequence[Alteration]) -> dict[str, StrataError | None]:
    """Apply the alterations (module docstring); each user's outcome, in the order users first appear."""
    outcome: dict[str, StrataError | None] = {}
    seen: set[tuple[str, str]] = set()
    for a in alterations:
        problem = _problem(a)
        if problem is None and (a.user, a.mechanism) in seen:
            problem = DuplicateResource(f"a credential of {a.user!r} is altered twice in one request")
        seen.add((a.user, a.mechanism))
        if outcome.get(a.user) is None:
            outcome[a.user] = problem
    good = [a for a in alterations if outcome[a.user] is None]
    deletions = [(a.user, a.mechanism) for a in good if a.salt is None]
    upsertions = []
    for a in good:
        if a.salt is not None and a.salted_password is not None:
            credential = from_salted_password(a.mechanism, a.salt, a.salted_password, a.iterations)
            upsertions.append(
                ScramRow(
                    a.user, a.mechanism, a.salt, credential.stored_key, credential.server_key, a.iterations
                )
            )
    if good:
        for user in store.alter_scram_credentials(deletions, upsertions):
            outcome[user] = UnknownScramCredential(f"{user!r} has no such SCRAM credential to remove")
    return outcome


async def alter_and_reload(
    store: SecurityStore, security: Security | None, alterations: Sequence[Alteration]
) -> dict[str, StrataError | None]:
    outcome = await asyncio.to_thread(alter, store, alterations)
    if security is not None:
        await asyncio.to_thread(security.refresh)
    return outcome


def describe(store: SecurityStore, users: Sequence[str] | None) -> dict[str, dict[str, int] | StrataError]:
    """Each user's stored mechanisms and iterations (every stored user for None); UnknownScramCredential
    for a user without one, DuplicateResource for a user named twice."""
    stored: dict[str, dict[str, int]] = {}
    for row in store.load_security().scram:
        stored.setdefault(row.user, {})[row.mechanism] = row.iterations
    if users is None:
        return dict(sorted(stored.items()))
    out: dict[str, dict[str, int] | StrataError] = {}
    for user in users:
        if user in out:
            out[user] = DuplicateResource(f"{user!r} is named twice in one request")
        elif user in stored:
            out[user] = stored[user]
        else:
            out[user] = UnknownScramCredential(f"{user!r} has no SCRAM credential")
    return out
