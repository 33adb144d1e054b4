"""ACLs and SCRAM credentials in the metadata store, on SQLite and PostgreSQL: stored once, matched by
filters, deleted per filter, credentials upserted and removed per user all or nothing, and the version
every change bumps (and only a change) seen by a second store on the same database, as another agent's."""

from __future__ import annotations

import threading

import pytest

from agents.principals import Principals, parse_principals
from agents.security import Security
from storage.acl_model import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from storage.metadata import MetadataStore, open_metadata_store
from storage.metadata.security import ScramRow

pytestmark = pytest.mark.integration


def _acl(
    name: str, op: Operation, principal: str = "User:bob", pattern: PatternType = PatternType.LITERAL
) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", op, Permission.ALLOW)


def _scram(user: str, mechanism: str = "SCRAM-SHA-256", iterations: int = 4096) -> ScramRow:
    return ScramRow(user, mechanism, b"salt-" + user.encode(), b"stored" * 4, b"server" * 4, iterations)


def test_acls_are_stored_once_and_deleted_by_filter(metadata_store: MetadataStore, metadata_url: str) -> None:
    store = metadata_store
    start = store.security_version()
    read, write = (
        _acl("orders", Operation.READ),
        _acl("orders.", Operation.WRITE, pattern=PatternType.PREFIXED),
    )
    assert store.create_acls([read, write, read]) == 2
    assert store.create_acls([read]) == 0  # stored already: nothing changes, not even the version
    assert store.security_version() == start + 1
    other = open_metadata_store(metadata_url)  # another agent's store on the same database
    try:
        rows = other.load_security()
        assert set(rows.acls) == {read, write}
        assert rows.version == start + 1
        deleted = other.delete_acls(
            [
                AclFilter(operation=Operation.WRITE),
                AclFilter(principal="User:bob"),
                AclFilter(principal="User:x"),
            ]
        )
        assert deleted == [[write], [read], []]  # a binding is reported by the first filter matching it
        assert store.load_security().acls == ()
        assert store.security_version() == start + 2
        assert other.delete_acls([AclFilter()]) == [[]]
        assert store.security_version() == start + 2
    finally:
        other.close()


def test_scram_credentials_per_user_all_or_nothing(metadata_store: MetadataStore) -> None:
    store = metadata_store
    assert store.alter_scram_credentials([], [_scram("ann"), _scram("ann", "SCRAM-SHA-512", 8192)]) == set()
    version = store.security_version()
    # bob's deletion names a credential he does not have: nothing of bob's changes, ann's does.
    missing = store.alter_scram_credentials(
        [("bob", "SCRAM-SHA-256"), ("ann", "SCRAM-SHA-512")], [_scram("bob"), _scram("ann", iterations=5000)]
    )
    assert missing == {"bob"}
    got = {(r.user, r.mechanism): r for r in store.load_security().scram}
    assert set(got) == {("ann", "SCRAM-SHA-256")}
    row = got[("ann", "SCRAM-SHA-256")]
    assert (row.salt, row.stored_key, row.server_key, row.iterations) == (
        b"salt-ann",
        b"stored" * 4,
        b"server" * 4,
        5000,
    )
    assert "stored" not in repr(row)
    assert store.security_version() == version + 1


def test_seeding_from_two_agents_at_once_stores_each_acl_once(metadata_url: str) -> None:
    """Two agents starting together with the same principals file: each ACL once, whoever wins."""
    principals: Principals = parse_principals(
        {
            "principals": {
                f"p{i}": {"password": "pw", "topics": {"read": [f"t{i}."], "admin": ["*"]}} for i in range(20)
            }
        }
    )
    stores = [open_metadata_store(metadata_url) for _ in range(2)]
    try:
        threads = [threading.Thread(target=Security(principals, s).seed) for s in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert set(stores[0].load_security().acls) == set(principals.file_acls())
        assert len(stores[0].load_security().acls) == 40
    finally:
        for s in stores:
            s.close()
