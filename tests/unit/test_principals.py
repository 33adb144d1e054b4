"""The principals file and the ACLs its grants seed (agents/principals.py), and the SASL exchange
(broker/sasl.py) driven by scramp's client: sans-IO over a SQLite store, so every rule is checked without
a socket."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from scramp import ScramClient

from agents.principals import Principals, load_principals, parse_principals
from agents.security import Security
from broker.sasl import SaslExchange, State
from storage.acl_model import AclBinding, Operation, PatternType, Permission, ResourceType
from storage.errors import (
    IllegalSaslState,
    SaslAuthenticationFailed,
    SettingsError,
    UnsupportedSaslMechanism,
)
from storage.metadata import open_metadata_store
from tests.fixtures.principals import BOB_TOKEN, PASSWORDS, PRINCIPALS_TOML


@pytest.fixture
def principals() -> Principals:
    return parse_principals(tomllib.loads(PRINCIPALS_TOML))


@pytest.fixture
def security(principals: Principals, tmp_path: Path) -> Iterator[Security]:
    store = open_metadata_store(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        found = Security(principals, store)
        found.seed()
        found.refresh()
        yield found
    finally:
        store.close()


def _allow(
    principal: str, resource: ResourceType, name: str, pattern: PatternType, op: Operation
) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", op, Permission.ALLOW)


def test_grants_become_acls(principals: Principals) -> None:
    """topics read/write/admin -> READ/WRITE/ALL, groups read/admin -> READ/ALL; prefixes PREFIXED and
    "*" LITERAL; superuser stays a super user (no ACL)."""
    t, g, pre = ResourceType.TOPIC, ResourceType.GROUP, PatternType.PREFIXED
    assert set(principals.file_acls()) == {
        _allow("User:alice", t, "orders.", pre, Operation.ALL),
        _allow("User:alice", g, "billing-", pre, Operation.READ),
        _allow("User:bob", t, "orders.", pre, Operation.READ),
        _allow("User:bob", g, "billing-", pre, Operation.READ),
    }
    admin = principals.get("admin")
    assert admin is not None
    assert admin.superuser
    doc = {"principals": {"s": {"password": "p", "topics": {"read": ["*"], "write": ["a"], "admin": ["b"]}}}}
    assert set(parse_principals(doc).file_acls()) == {
        _allow("User:s", t, "*", PatternType.LITERAL, Operation.READ),
        _allow("User:s", t, "a", pre, Operation.WRITE),
        _allow("User:s", t, "b", pre, Operation.ALL),
    }


def test_subject_grants_become_subject_acls() -> None:
    """subjects read -> READ and DESCRIBE_CONFIGS (a reader may read a subject's config and mode), write ->
    WRITE, admin -> ALL, on SUBJECT, the schema registry's resource type."""
    doc = {"principals": {"svc": {"password": "pw", "subjects": {"read": ["*"], "write": ["orders."]}}}}
    s, star = ResourceType.SUBJECT, "*"
    assert set(parse_principals(doc).file_acls()) == {
        _allow("User:svc", s, star, PatternType.LITERAL, Operation.READ),
        _allow("User:svc", s, star, PatternType.LITERAL, Operation.DESCRIBE_CONFIGS),
        _allow("User:svc", s, "orders.", PatternType.PREFIXED, Operation.WRITE),
    }
    admin = {"principals": {"a": {"password": "pw", "subjects": {"admin": ["x"]}}}}
    assert [b.operation for b in parse_principals(admin).file_acls()] == [Operation.ALL]
    with pytest.raises(SettingsError, match=r"subjects\.delete"):
        parse_principals({"principals": {"a": {"password": "pw", "subjects": {"delete": ["x"]}}}})


def test_table_grants_become_table_acls() -> None:
    """tables read -> READ on TABLE, the lake's tables as the Iceberg catalog names them; reading is all the
    read-only catalog has to grant."""
    doc = {"principals": {"svc": {"password": "pw", "tables": {"read": ["strata.orders", "*"]}}}}
    t = ResourceType.TABLE
    assert set(parse_principals(doc).file_acls()) == {
        _allow("User:svc", t, "strata.orders", PatternType.PREFIXED, Operation.READ),
        _allow("User:svc", t, "*", PatternType.LITERAL, Operation.READ),
    }
    with pytest.raises(SettingsError, match=r"tables\.write"):
        parse_principals({"principals": {"a": {"password": "pw", "tables": {"write": ["x"]}}}})


def test_seeding_is_idempotent(security: Security) -> None:
    version = security.version
    assert security.seed() == 0  # a restart with the same file adds nothing
    assert not security.refresh()
    assert security.version == version
    assert len(security.acls) == 4


def test_credentials_are_checked_and_never_shown(principals: Principals) -> None:
    assert principals.by_password("alice", PASSWORDS["alice"]) is principals.get("alice")
    assert principals.by_password("alice", PASSWORDS["bob"]) is None
    assert principals.by_password("nobody", "x") is None
    assert principals.by_token(BOB_TOKEN) is principals.get("bob")
    assert principals.by_token("nope") is None
    with_legacy = principals.with_tokens({"legacy"})
    legacy = with_legacy.by_token("legacy")
    assert legacy is not None
    assert legacy.superuser
    for name in PASSWORDS:
        principal = principals.get(name)
        assert principal is not None
        assert PASSWORDS[name] not in repr(principal)
    assert BOB_TOKEN not in repr(principals.get("bob"))


@pytest.mark.parametrize(
    ("doc", "complaint"),
    [
        ({"principals": {"a": {"password": "p", "topics": {"delete": ["x"]}}}}, "topics.delete"),
        ({"principals": {"a": {"password": "p", "groups": {"write": ["x"]}}}}, "groups.write"),
        ({"principals": {"a": {"password": "p", "topics": {"read": "x"}}}}, "list of non-empty"),
        ({"principals": {"a": {"password": "p", "topics": {"read": [""]}}}}, "list of non-empty"),
        ({"principals": {"a": {"password": "p", "colour": "red"}}}, "unknown keys"),
        ({"principals": {"a": {}}}, "neither a password nor tokens"),
        ({"principals": {"a": {"password": ""}}}, "non-empty string"),
        ({"principals": {"a:b": {"password": "p"}}}, "names must be"),
        ({"principals": {"a": {"password": "p", "superuser": "yes"}}}, "true or false"),
        ({"users": {}}, "unknown top-level"),
    ],
)
def test_a_wrong_file_is_refused_with_a_clear_message(doc: dict[str, object], complaint: str) -> None:
    with pytest.raises(SettingsError) as info:
        parse_principals(doc)
    assert complaint in info.value.message


def test_the_file_itself(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[principals.a]\npassword = "pw"\n')
    assert load_principals(str(path)).get("a") is not None
    path.write_text("[principals.a\n")
    with pytest.raises(SettingsError, match="not valid UTF-8 TOML"):
        load_principals(str(path))
    path.write_bytes(b'[principals.a]\npassword = "\xff"\n')
    with pytest.raises(SettingsError, match="not valid UTF-8 TOML"):
        load_principals(str(path))
    path.write_text('[principals.a]\npassword = "zq9k\\u0007x7vv"\n')  # SASLprep refuses control chars
    with pytest.raises(SettingsError, match="SASLprep") as info:
        load_principals(str(path))
    assert "zq9k" not in info.value.message
    with pytest.raises(SettingsError, match="share a bearer token"):
        parse_principals({"principals": {"a": {"tokens": ["t"]}, "b": {"tokens": ["t"]}}})
    with pytest.raises(SettingsError, match="cannot read"):
        load_principals(str(path) + ".missing")
    with pytest.raises(SettingsError, match="reserved"):
        parse_principals({"principals": {"token": {"password": "p"}}}).with_tokens({"t"})


def test_plain_exchange(principals: Principals, security: Security) -> None:
    ok = SaslExchange(security)
    ok.handshake("PLAIN")
    assert ok.authenticate(f"\0alice\0{PASSWORDS['alice']}".encode()) == b""
    assert ok.state is State.AUTHENTICATED
    assert ok.principal is principals.get("alice")
    for token in (
        f"\0alice\0{PASSWORDS['bob']}".encode(),
        f"bob\0alice\0{PASSWORDS['alice']}".encode(),  # acting as someone else
        b"\xff\xfe",
        b"alice",
    ):
        bad = SaslExchange(security)
        bad.handshake("PLAIN")
        with pytest.raises(SaslAuthenticationFailed):
            bad.authenticate(token)
        assert bad.state is State.FAILED
        assert bad.principal is None


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange(principals: Principals, security: Security, mechanism: str) -> None:
    for user, password, works in (
        ("bob", PASSWORDS["bob"], True),
        ("bob", "wrong", False),
        ("nobody", "wrong", False),
    ):
        exchange = SaslExchange(security)
        exchange.handshake(mechanism)
        client = ScramClient([mechanism], user, password)
        client.set_server_first(exchange.authenticate(client.get_client_first().encode()).decode())
        final = client.get_client_final().encode()
        if works:
            client.set_server_final(exchange.authenticate(final).decode())  # verifies the server, too
            assert exchange.principal is principals.get("bob")
        else:
            with pytest.raises(SaslAuthenticationFailed):
                exchange.authenticate(final)
            assert exchange.principal is None


def test_exchange_order(security: Security) -> None:
    early = SaslExchange(security)
    with pytest.raises(IllegalSaslState):
        early.authenticate(b"\0a\0b")
    unknown = SaslExchange(security)
    with pytest.raises(UnsupportedSaslMechanism):
        unknown.handshake("GSSAPI")
    twice = SaslExchange(security)
    twice.handshake("PLAIN")
    twice.authenticate(f"\0bob\0{PASSWORDS['bob']}".encode())
    with pytest.raises(IllegalSaslState):
        twice.handshake("PLAIN")
    with pytest.raises(IllegalSaslState):
        twice.authenticate(b"\0bob\0x")
