"""The principals file and its grants (agents/principals.py), and the SASL exchange (broker/sasl.py) driven
by scramp's client: sans-IO, so every rule is checked without a socket."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from scramp import ScramClient

from agents.principals import Op, Principals, Resource, load_principals, parse_principals
from broker.sasl import SaslExchange, State
from storage.errors import (
    IllegalSaslState,
    SaslAuthenticationFailed,
    SettingsError,
    UnsupportedSaslMechanism,
)
from tests.fixtures.principals import BOB_TOKEN, PASSWORDS, PRINCIPALS_TOML


@pytest.fixture
def principals() -> Principals:
    return parse_principals(tomllib.loads(PRINCIPALS_TOML))


def test_grants_follow_prefixes_and_admin_implies_read_and_write(principals: Principals) -> None:
    alice, bob, carol, admin = (principals.get(n) for n in ("alice", "bob", "carol", "admin"))
    assert alice is not None and bob is not None and carol is not None and admin is not None  # noqa: PT018
    for op in Op:
        assert alice.may(op, Resource.TOPIC, "orders.eu")  # admin implies read and write
        assert not alice.may(op, Resource.TOPIC, "orders")  # the prefix is "orders."
        assert admin.may(op, Resource.TOPIC, "anything")
        assert admin.may(op, Resource.GROUP, "anything")
        assert not carol.may(op, Resource.TOPIC, "orders.eu")
    assert bob.may(Op.READ, Resource.TOPIC, "orders.eu")
    assert not bob.may(Op.WRITE, Resource.TOPIC, "orders.eu")
    assert not bob.may(Op.ADMIN, Resource.TOPIC, "orders.eu")
    assert bob.may(Op.READ, Resource.GROUP, "billing-1")
    assert not bob.may(Op.ADMIN, Resource.GROUP, "billing-1")
    assert not bob.may(Op.READ, Resource.GROUP, "other")
    assert alice.may_any(Op.WRITE, Resource.TOPIC)
    assert not bob.may_any(Op.WRITE, Resource.TOPIC)
    star = parse_principals({"principals": {"s": {"password": "p", "topics": {"read": ["*"]}}}}).get("s")
    assert star is not None
    assert star.may(Op.READ, Resource.TOPIC, "x")


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


def test_plain_exchange(principals: Principals) -> None:
    ok = SaslExchange(principals)
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
        bad = SaslExchange(principals)
        bad.handshake("PLAIN")
        with pytest.raises(SaslAuthenticationFailed):
            bad.authenticate(token)
        assert bad.state is State.FAILED
        assert bad.principal is None


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange(principals: Principals, mechanism: str) -> None:
    for user, password, works in (
        ("bob", PASSWORDS["bob"], True),
        ("bob", "wrong", False),
        ("nobody", "wrong", False),
    ):
        exchange = SaslExchange(principals)
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


def test_exchange_order(principals: Principals) -> None:
    early = SaslExchange(principals)
    with pytest.raises(IllegalSaslState):
        early.authenticate(b"\0a\0b")
    unknown = SaslExchange(principals)
    with pytest.raises(UnsupportedSaslMechanism):
        unknown.handshake("GSSAPI")
    twice = SaslExchange(principals)
    twice.handshake("PLAIN")
    twice.authenticate(f"\0bob\0{PASSWORDS['bob']}".encode())
    with pytest.raises(IllegalSaslState):
        twice.handshake("PLAIN")
    with pytest.raises(IllegalSaslState):
        twice.authenticate(b"\0bob\0x")
