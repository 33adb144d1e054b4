"""Kafka's ACL evaluation (agents/acl.py) and filters (storage/acl_model.py): deny wins, literal and prefixed
patterns, the wildcard principal and name, hosts, the implications, and authorizeByResourceType; then the
same rules checked against a brute-force reading of Kafka's definition on random ACL sets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.acl import IMPLIED_BY, Acls, Request, granting
from storage.acl_model import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    coerce,
    validate_binding,
)
from storage.errors import BadRequest
from tests.examples import examples

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
Op = Operation


def acl(
    name: str,
    op: Operation,
    *,
    pattern: PatternType = LIT,
    permission: Permission = ALLOW,
    principal: str = "User:alice",
    host: str = "*",
    resource: ResourceType = T,
) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, op, permission)


def may(acls: Acls, op: Operation, name: str, *, who: str = "User:alice", host: str = "10.0.0.1") -> bool:
    return acls.allowed(Request(who, host, op, T, name))


def test_nothing_is_allowed_without_an_acl() -> None:
    assert not may(Acls(), Op.READ, "orders")
    assert not may(Acls([acl("orders", Op.READ, principal="User:bob")]), Op.READ, "orders")
    assert not may(Acls([acl("orders", Op.READ, resource=G)]), Op.READ, "orders")


def test_literal_prefixed_and_wildcard_names() -> None:
    acls = Acls([acl("orders", Op.READ), acl("pay.", Op.WRITE, pattern=PRE), acl("*", Op.DESCRIBE)])
    assert may(acls, Op.READ, "orders")
    assert not may(acls, Op.READ, "orders2")  # literal is the name itself
    assert may(acls, Op.WRITE, "pay.eu")
    assert may(acls, Op.WRITE, "pay.")
    assert not may(acls, Op.WRITE, "pay")
    assert may(acls, Op.DESCRIBE, "anything")
    # A prefixed "*" is a prefix like any other, not the wildcard.
    assert not may(Acls([acl("*", Op.READ, pattern=PRE)]), Op.READ, "orders")
    assert may(Acls([acl("*", Op.READ, pattern=PRE)]), Op.READ, "*x")


def test_deny_wins_over_allow() -> None:
    acls = Acls([acl("orders.", Op.ALL, pattern=PRE), acl("orders.secret", Op.READ, permission=DENY)])
    assert may(acls, Op.READ, "orders.eu")
    assert not may(acls, Op.READ, "orders.secret")
    assert may(acls, Op.WRITE, "orders.secret")  # the DENY names READ only
    # A DENY on an implying operation does not deny the implied one (Kafka's rule).
    assert may(acls, Op.DESCRIBE, "orders.secret")
    everything = Acls([acl("*", Op.ALL), acl("x", Op.ALL, permission=DENY)])
    assert all(not may(everything, op, "x") for op in Op if op not in (Op.ANY, Op.UNKNOWN))


def test_wildcard_principal_and_hosts() -> None:
    acls = Acls([acl("t", Op.READ, principal="User:*"), acl("t", Op.WRITE, host="10.0.0.9")])
    assert may(acls, Op.READ, "t", who="User:anyone")
    assert may(acls, Op.WRITE, "t", host="10.0.0.9")
    assert not may(acls, Op.WRITE, "t", host="10.0.0.1")
    denied_everyone = Acls([acl("t", Op.READ), acl("t", Op.READ, principal="User:*", permission=DENY)])
    assert not may(denied_everyone, Op.READ, "t")
    from_bad_host = Acls([acl("t", Op.READ), acl("t", Op.READ, host="10.6.6.6", permission=DENY)])
    assert may(from_bad_host, Op.READ, "t")
    assert not may(from_bad_host, Op.READ, "t", host="10.6.6.6")


def test_implications() -> None:
    for implying in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert may(Acls([acl("t", implying)]), Op.DESCRIBE, "t")
    for other in (Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.IDEMPOTENT_WRITE):
        assert not may(Acls([acl("t", other)]), Op.DESCRIBE, "t")
    assert may(Acls([acl("t", Op.ALTER_CONFIGS)]), Op.DESCRIBE_CONFIGS, "t")
    assert not may(Acls([acl("t", Op.READ)]), Op.DESCRIBE_CONFIGS, "t")
    assert not may(Acls([acl("t", Op.DESCRIBE)]), Op.READ, "t")
    for op in (Op.READ, Op.CREATE, Op.DESCRIBE_CONFIGS, Op.CLUSTER_ACTION):
        assert may(Acls([acl("t", Op.ALL)]), op, "t")


def test_allowed_on_some_as_kafka_679() -> None:
    """IDEMPOTENT_WRITE by WRITE on some topic: not when every allowed name is denied again."""

    def some(*bindings: AclBinding) -> bool:
        return Acls(bindings).allowed_on_some("User:alice", "10.0.0.1", Op.WRITE, T)

    assert not some()
    assert some(acl("orders", Op.WRITE))
    assert some(acl("orders.", Op.ALL, pattern=PRE))
    assert not some(acl("orders", Op.READ))
    assert not some(acl("orders", Op.WRITE), acl("orders", Op.WRITE, permission=DENY))
    assert not some(acl("orders.eu", Op.WRITE), acl("orders.", Op.WRITE, pattern=PRE, permission=DENY))
    assert not some(acl("orders", Op.WRITE), acl("*", Op.ALL, permission=DENY))
    assert some(acl("orders", Op.WRITE), acl("payments", Op.WRITE, permission=DENY))
    assert not some(acl("orders", Op.WRITE, host="10.9.9.9"))


def test_filters_match_as_kafka_does() -> None:
    lit, pre, star = acl("orders", Op.READ), acl("ord", Op.READ, pattern=PRE), acl("*", Op.READ)
    everything = [lit, pre, star]
    assert [b for b in everything if AclFilter().matches(b)] == everything
    assert [b for b in everything if AclFilter(resource_name="orders").matches(b)] == [lit]
    match = AclFilter(resource_name="orders", pattern_type=PatternType.MATCH)
    assert [b for b in everything if match.matches(b)] == everything
    assert [b for b in everything if AclFilter(pattern_type=PRE).matches(b)] == [pre]
    assert not AclFilter(principal="User:bob").matches(lit)
    assert not AclFilter(operation=Op.WRITE).matches(lit)
    assert AclFilter(permission=ALLOW, host="*").matches(lit)
    with pytest.raises(BadRequest):
        AclFilter(operation=coerce(Operation, 99)).check()


@pytest.mark.parametrize(
    ("binding", "complaint"),
    [
        (AclBinding(ResourceType.ANY, "t", LIT, "User:a", "*", Op.READ, ALLOW), "resource type"),
        (AclBinding(T, "t", PatternType.MATCH, "User:a", "*", Op.READ, ALLOW), "pattern type"),
        (AclBinding(T, "t", LIT, "User:a", "*", Op.ANY, ALLOW), "operation"),
        (AclBinding(T, "t", LIT, "User:a", "*", Op.READ, Permission.ANY), "permission"),
        (AclBinding(T, "", LIT, "User:a", "*", Op.READ, ALLOW), "empty"),
        (AclBinding(C, "other", LIT, "User:a", "*", Op.ALTER, ALLOW), "kafka-cluster"),
        (AclBinding(T, "t", LIT, "alice", "*", Op.READ, ALLOW), "colon"),
    ],
)
def test_bindings_kafka_refuses(binding: AclBinding, complaint: str) -> None:
    with pytest.raises(BadRequest, match=complaint):
        validate_binding(binding)


# --- property: the index and memo agree with Kafka's definition read literally ----------------------------
NAMES = st.sampled_from(["a", "ab", "abc", "b", "*"])
OPS = st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALL, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS])
BINDINGS = st.builds(
    AclBinding,
    st.sampled_from([T, G]),
    NAMES,
    st.sampled_from([LIT, PRE]),
    st.sampled_from(["User:alice", "User:*", "User:bob"]),
    st.sampled_from(["*", "10.0.0.1", "10.0.0.2"]),
    OPS,
    st.sampled_from([ALLOW, DENY]),
)


def _kafka(bindings: list[AclBinding], r: Request) -> bool:
    def applies(b: AclBinding) -> bool:
        name_ok = (
            b.resource_name in (r.name, "*") if b.pattern_type is LIT else r.name.startswith(b.resource_name)
        )
        return (
            b.resource_type is r.resource_type
            and b.principal in (r.principal, "User:*")
            and b.host in ("*", r.host)
            and name_ok
        )

    matching = [b for b in bindings if applies(b)]
    if any(b.permission is DENY and b.operation in (r.operation, Op.ALL) for b in matching):
        return False
    allowed_by = {r.operation, Op.ALL} | IMPLIED_BY.get(r.operation, frozenset())
    return any(b.permission is ALLOW and b.operation in allowed_by for b in matching)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(BINDINGS, max_size=8),
    st.sampled_from(["a", "ab", "abc", "b", "c"]),
    OPS,
    st.sampled_from([T, G]),
    st.sampled_from(["10.0.0.1", "10.0.0.2"]),
)
def test_decisions_match_the_definition(
    bindings: list[AclBinding], name: str, op: Operation, resource: ResourceType, host: str
) -> None:
    acls = Acls(bindings)
    request = Request("User:alice", host, op, resource, name)
    assert acls.allowed(request) == _kafka(bindings, request)
    assert acls.allowed(request) == _kafka(bindings, request)  # memoised answer, same
    assert granting(op) >= {op, Op.ALL}
