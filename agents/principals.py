"""The principals file: who the principals are, the credentials they authenticate with, and the grants
that seed Kafka's ACLs.

One source for both doors: a TOML file (``--principals-file``) names each principal once, with
the password its Kafka clients authenticate with over SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and HTTP
clients with Basic auth, the bearer tokens its HTTP clients may send instead, and its grants::

    [principals.alice]
    password = "alice-secret"
    tokens = ["alice-token"]          # optional
    superuser = false                 # optional: a Kafka super user, allowed every operation
    topics = { read = ["orders."], write = ["orders."], admin = [] }
    groups = { read = ["billing-"] }
    subjects = { read = ["orders."], write = ["orders."] }   # the schema registry's subjects
    tables = { read = ["strata.orders"] }   # the lake's Iceberg tables, as <namespace>.<table>

A grant is an operation on the names starting with a prefix; ``"*"`` is every name. Grants are not checked
themselves: at start-up each becomes a Kafka ACL in the metadata store (``file_acls``), which is what every
request is checked against (agents/security.py), beside the ACLs added at run time:
- topics: ``read`` -> ALLOW READ, ``write`` -> ALLOW WRITE, ``admin`` -> ALLOW ALL on TOPIC;
- groups: ``read`` -> ALLOW READ, ``admin`` -> ALLOW ALL on GROUP;
- subjects: ``read`` -> ALLOW READ and DESCRIBE_CONFIGS (schemas, versions, lookups, and the subject's
  config and mode), ``write`` -> ALLOW WRITE (registrations and compatibility checks), ``admin`` -> ALLOW
  ALL on SUBJECT (deletes, config and mode changes too);
- tables (the lake's, through the agents' read-only Iceberg catalog): ``read`` -> ALLOW READ on TABLE
  (loading a table and reading its files; READ implies the DESCRIBE that listing needs);
- a prefix -> a PREFIXED pattern, ``"*"`` -> the LITERAL name ``*``; principal ``User:<name>``, host ``*``.

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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from scramp import ScramException, ScramMechanism

from agents.scram import SCRAM_ITERATIONS, SCRAM_MECHANISMS, ScramCredential
from storage.acl_model import (
    WILDCARD,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    user_principal,
)
from storage.errors import SettingsError

# The grants a principals file may give, per resource, and the ACL operations each becomes.
GRANTS: dict[str, tuple[ResourceType, dict[str, tuple[Operation, ...]]]] = {
    "topics": (
        ResourceType.TOPIC,
        {"read": (Operation.READ,), "write": (Operation.WRITE,), "admin": (Operation.ALL,)},
    ),
    "groups": (ResourceType.GROUP, {"read": (Operation.READ,), "admin": (Operation.ALL,)}),
    # A reader of a subject may also read its config and mode, as a registry client that reads schemas
    # expects; changing them is the admin's.
    "subjects": (
        ResourceType.SUBJECT,
        {
            "read": (Operation.READ, Operation.DESCRIBE_CONFIGS),
            "write": (Operation.WRITE,),
            "admin": (Operation.ALL,),
        },
    ),
    # The catalog is read-only: reading is all there is to grant.
    "tables": (ResourceType.TABLE, {"read": (Operation.READ,)}),
}


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    superuser: bool = False
    # The ACLs the file grants this principal (seeded into the metadata store, see the module docstring).
    acls: tuple[AclBinding, ...] = ()
    password: str | None = field(default=None, repr=False)
    tokens: frozenset[str] = field(default=frozenset(), repr=False)
    scram: Mapping[str, ScramCredential] = field(default_factory=dict, repr=False)

    @property
    def acl_principal(self) -> str:
        return user_principal(self.name)


# The principal of a bearer token from STRATA_API_TOKENS: those tokens predate principals and have always
# allowed everything.
TOKEN_SUPERUSER = "token"

# Whoever uses a front door that runs without authentication: every operation is allowed.
ANYONE = Principal("anyone", superuser=True)


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

    def __iter__(self) -> Iterator[Principal]:
        return iter(self._by_name.values())

    def file_acls(self) -> list[AclBinding]:
        """Every principal's grants as ACL bindings: what start-up seeds into the metadata store."""
        return sorted({b for p in self._by_name.values() for b in p.acls})

    def get(self, name: str) -> Principal | None:
        return self._by_name.get(name)

    def scram_credential(self, mechanism: str, name: str) -> ScramCredential | None:
        """The SCRAM credential the file's password gives ``name`` (None: not a principal of the file, or
        one without a password)."""
        principal = self._by_name.get(name)
        return principal.scram.get(mechanism) if principal is not None else None

    def made_up_credential(self, mechanism: str, name: str) -> ScramCredential:
        """A credential for a name that has none: no password matches it."""
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
    unknown = set(body) - {"password", "tokens", "superuser", *GRANTS}
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
    acls = _grants(name, body, where)
    try:
        scram = {m: scram_credential(m, password) for m in SCRAM_MECHANISMS} if password is not None else {}
    except ScramException as exc:  # its message names the offending character class, not the password
        raise SettingsError(f"{where}: the password cannot be used with SCRAM (SASLprep): {exc}") from None
    return Principal(name, superuser, acls, password, frozenset(tokens), scram)


def _grants(name: str, body: Mapping[str, object], where: str) -> tuple[AclBinding, ...]:
    """The ``topics``, ``groups``, ``subjects`` and ``tables`` tables of one principal as ALLOW bindings
    (module docstring)."""
    acls: list[AclBinding] = []
    for section_name, (resource_type, operations) in GRANTS.items():
        section = body.get(section_name, {})
        if not isinstance(section, dict):
            raise SettingsError(f"{where}: {section_name} must be a table of operation = [prefixes]")
        for op_name, prefixes in section.items():
            if op_name not in operations:
                raise SettingsError(f"{where}: {section_name}.{op_name} is not one of {sorted(operations)}")
            if not isinstance(prefixes, list) or not all(isinstance(p, str) and p for p in prefixes):
                raise SettingsError(f"{where}: {section_name}.{op_name} must be a list of non-empty prefixes")
            for prefix in prefixes:
                pattern = PatternType.LITERAL if prefix == WILDCARD else PatternType.PREFIXED
                acls += [
                    AclBinding(
                        resource_type, prefix, pattern, user_principal(name), WILDCARD, op, Permission.ALLOW
                    )
                    for op in operations[op_name]
                ]
    return tuple(acls)
