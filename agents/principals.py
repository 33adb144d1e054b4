"""Who may do what: the principals of both front doors, their credentials and their permissions.

One source for both doors: a TOML file (``--principals-file``) names each principal once, with
the password its Kafka clients authenticate with over SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and HTTP
clients with Basic auth, the bearer tokens its HTTP clients may send instead, and its grants::

    [principals.alice]
    password = "alice-secret"
    tokens = ["alice-token"]          # optional
    superuser = false                 # optional: every operation on every name
    topics = { read = ["orders."], write = ["orders."], admin = [] }
    groups = { read = ["billing-"] }

A grant is an operation on the names starting with a prefix; ``"*"`` is every name. The operations:
- topics: ``read`` (fetch, list offsets, describe, commit a group's offset for it), ``write`` (produce) and
  ``admin`` (create, delete, alter configs, add partitions, compact);
- groups: ``read`` (join, commit, fetch offsets, describe) and ``admin`` (delete a group or its offsets).
``admin`` implies ``read`` and ``write`` on the same names, as Kafka's ALL implies every operation.

TOML because it is in the standard library (``tomllib``) and is what people write configuration in. The
file holds passwords in clear, like Kafka's JAAS file for PLAIN: keep it readable by Strata only. SCRAM's
salted credentials are derived from the password when the file is loaded (a fresh salt per agent, which
SCRAM allows: each exchange sends the salt it uses).

Invariant: a principal's ``repr`` and every error message name the principal, never a secret.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from scramp import ScramException, ScramMechanism

from storage.errors import Forbidden, GroupForbidden, SettingsError

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# RFC 7677's minimum; Kafka's kafka-configs --add-config SCRAM-SHA-256=[iterations=4096,...] default.
SCRAM_ITERATIONS = 4096


class Resource(Enum):
    TOPIC = "topics"
    GROUP = "groups"


class Op(Enum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


# Which operations may be granted on which resource.
GRANTABLE: dict[Resource, frozenset[Op]] = {
    Resource.TOPIC: frozenset({Op.READ, Op.WRITE, Op.ADMIN}),
    Resource.GROUP: frozenset({Op.READ, Op.ADMIN}),
}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int = SCRAM_ITERATIONS


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    superuser: bool = False
    # (resource, op) -> name prefixes; "*" matches every name.
    grants: Mapping[tuple[Resource, Op], tuple[str, ...]] = field(default_factory=dict)
    password: str | None = field(default=None, repr=False)
    tokens: frozenset[str] = field(default=frozenset(), repr=False)
    scram: Mapping[str, ScramCredential] = field(default_factory=dict, repr=False)

    def may(self, op: Op, resource: Resource, name: str | None) -> bool:
        if name is None:
            return False  # a null topic or group name (the Kafka door decodes them) matches no grant
        if self.superuser:
            return True
        ops = (op, Op.ADMIN) if op is not Op.ADMIN else (Op.ADMIN,)
        for granted in ops:
            for prefix in self.grants.get((resource, granted), ()):
                if prefix == "*" or name.startswith(prefix):
                    return True
        return False

    def may_any(self, op: Op, resource: Resource) -> bool:
        """Whether some name allows ``op`` (an idempotent producer needs write on some topic, as Kafka's
        KIP-679 asks)."""
        if self.superuser:
            return True
        ops = (op, Op.ADMIN) if op is not Op.ADMIN else (Op.ADMIN,)
        return any(self.grants.get((resource, granted)) for granted in ops)


# The principal of a bearer token from STRATA_API_TOKENS: those tokens predate principals and have always
# allowed everything.
TOKEN_SUPERUSER = "token"

# Whoever uses a front door that runs without authentication: every operation is allowed.
ANYONE = Principal("anyone", superuser=True)


# The checks both front doors make (api/authz.py, broker/context.py), on the principal of the request:
# ANYONE without authentication, None for a request that has not authenticated.


def may(who: Principal | None, op: Op, resource: Resource, name: str | None) -> bool:
    return who is not None and who.may(op, resource, name)


def may_describe(who: Principal | None, topic: str | None) -> bool:
    """Describing a topic (its partitions, offsets and configs): Kafka's DESCRIBE, which its READ and
    WRITE imply. DescribeConfigs asks the same, where Kafka asks DESCRIBE_CONFIGS (implied only by
    ALTER_CONFIGS): a topic's configs are no secret from those who may read or write it."""
    return may(who, Op.READ, Resource.TOPIC, topic) or may(who, Op.WRITE, Resource.TOPIC, topic)


def require(who: Principal | None, op: Op, resource: Resource, name: str | None) -> None:
    """Forbidden (a topic) or GroupForbidden (a group) unless ``may``: HTTP 403, and on the Kafka door
    TOPIC_/GROUP_AUTHORIZATION_FAILED."""
    if not may(who, op, resource, name):
        message = f"principal {who.name if who else '?'!r} may not {op.value} {resource.value[:-1]} {name!r}"
        raise Forbidden(message) if resource is Resource.TOPIC else GroupForbidden(message)


def require_describe(who: Principal | None, topic: str | None) -> None:
    if not may_describe(who, topic):
        require(who, Op.READ, Resource.TOPIC, topic)


class Principals:
    """Every principal, found by name, by bearer token, or by name and password."""

    def __init__(self, principals: Iterable[Principal]) -> None:
        self._by_name = {p.name: p for p in principals}
        self._tokens = [(token, p) for p in self._by_name.values() for token in p.tokens]
        owners: dict[str, str] = {}
        for token, principal in self._tokens:
            if token in owners:
                raise SettingsError(
                    f"principals {owners[token]!r} and {principal.name!r} share a bearer token: each token "
                    "must name one principal"
                )
            owners[token] = principal.name
        # SCRAM for a name that is not a principal: a stable salt per name (so that asking twice does not
        # tell a made-up name from a real one) and one made-up key pair per mechanism, made once here (so
        # that a made-up name costs no password hashing per attempt). No password matches these keys.
        self._secret = os.urandom(32)
        self._unknown_keys = {m: (os.urandom(64), os.urandom(64)) for m in SCRAM_MECHANISMS}

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: str) -> Principal | None:
        return self._by_name.get(name)

    def scram_credential(self, mechanism: str, name: str) -> ScramCredential:
        """The SCRAM credential of ``name``, or a made-up one that no password matches."""
        principal = self._by_name.get(name)
        credential = principal.scram.get(mechanism) if principal is not None else None
        if credential is not None:
            return credential
        digest = hashlib.sha512 if mechanism.endswith("512") else hashlib.sha256
        salt = hmac.new(self._secret, name.encode(), digest).digest()[:16]
        stored, server = self._unknown_keys[mechanism]
        size = digest().digest_size
        return ScramCredential(salt, stored[:size], server[:size])

    def by_password(self, name: str, password: str) -> Principal | None:
        principal = self._by_name.get(name)
        if principal is None or principal.password is None:
            # Compare anyway, so that an unknown name takes as long as a wrong password.
            hmac.compare_digest(password.encode(), password.encode())
            return None
        if hmac.compare_digest(password.encode(), principal.password.encode()):
            return principal
        return None

    def by_token(self, token: str) -> Principal | None:
        found = None
        for candidate, principal in self._tokens:  # every token compared: no early exit to time
            if hmac.compare_digest(token.encode(), candidate.encode()):
                found = principal
        return found

    def with_tokens(self, tokens: Iterable[str]) -> Principals:
        """These principals plus the STRATA_API_TOKENS tokens, as one superuser principal."""
        tokens = frozenset(tokens)
        if not tokens:
            return self
        if TOKEN_SUPERUSER in self._by_name:
            raise SettingsError(f"the principal name {TOKEN_SUPERUSER!r} is reserved for STRATA_API_TOKENS")
        return Principals(
            [*self._by_name.values(), Principal(TOKEN_SUPERUSER, superuser=True, tokens=tokens)]
        )


def scram_credential(mechanism: str, password: str) -> ScramCredential:
    """ScramException for a password SASLprep refuses (control characters, mixed directions)."""
    salt, stored_key, server_key, iterations = ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=SCRAM_ITERATIONS
    )
    return ScramCredential(salt, stored_key, server_key, iterations)


def load_principals(path: str) -> Principals:
    """Read a principals file; SettingsError naming the file and the principal for anything wrong."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as exc:
        raise SettingsError(f"cannot read the principals file {path}: {exc.strerror}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SettingsError(f"the principals file {path} is not valid UTF-8 TOML: {exc}") from exc
    return parse_principals(doc, source=path)


def parse_principals(doc: Mapping[str, object], *, source: str = "principals") -> Principals:
    unknown = set(doc) - {"principals"}
    if unknown:
        raise SettingsError(f"{source}: unknown top-level keys {sorted(unknown)}; expected [principals.NAME]")
    table = doc.get("principals", {})
    if not isinstance(table, dict):
        raise SettingsError(f"{source}: 'principals' must be a table of [principals.NAME]")
    return Principals(_principal(name, body, source) for name, body in table.items())


def _principal(name: str, body: object, source: str) -> Principal:
    where = f"{source}: principal {name!r}"
    if not name or "," in name or ":" in name:
        raise SettingsError(f"{where}: names must be non-empty, without ',' or ':'")
    if not isinstance(body, dict):
        raise SettingsError(f"{where} must be a table")
    unknown = set(body) - {"password", "tokens", "superuser", "topics", "groups"}
    if unknown:
        raise SettingsError(f"{where}: unknown keys {sorted(unknown)}")
    password = body.get("password")
    if password is not None and (not isinstance(password, str) or not password):
        raise SettingsError(f"{where}: password must be a non-empty string")
    tokens = body.get("tokens", [])
    if not isinstance(tokens, list) or not all(isinstance(t, str) and t for t in tokens):
        raise SettingsError(f"{where}: tokens must be a list of non-empty strings")
    superuser = body.get("superuser", False)
    if not isinstance(superuser, bool):
        raise SettingsError(f"{where}: superuser must be true or false")
    if password is None and not tokens:
        raise SettingsError(f"{where} has neither a password nor tokens, so it could never authenticate")
    grants: dict[tuple[Resource, Op], tuple[str, ...]] = {}
    for resource in Resource:
        section = body.get(resource.value, {})
        if not isinstance(section, dict):
            raise SettingsError(f"{where}: {resource.value} must be a table of operation = [prefixes]")
        for op_name, prefixes in section.items():
            try:
                op = Op(op_name)
            except ValueError:
                op = None
            if op is None or op not in GRANTABLE[resource]:
                allowed = sorted(o.value for o in GRANTABLE[resource])
                raise SettingsError(f"{where}: {resource.value}.{op_name} is not one of {allowed}")
            if not isinstance(prefixes, list) or not all(isinstance(p, str) and p for p in prefixes):
                raise SettingsError(
                    f"{where}: {resource.value}.{op_name} must be a list of non-empty prefixes"
                )
            grants[(resource, op)] = tuple(prefixes)
    try:
        scram = {m: scram_credential(m, password) for m in SCRAM_MECHANISMS} if password is not None else {}
    except ScramException as exc:  # its message names the offending character class, not the password
        raise SettingsError(f"{where}: the password cannot be used with SCRAM (SASLprep): {exc}") from None
    return Principal(name, superuser, grants, password, frozenset(tokens), scram)
