"""Kafka's ACL and SCRAM admin APIs with confluent-kafka's AdminClient against running agents: ACLs created,
described and deleted; a SCRAM user added at run time (the client salts the password, the server never
sees it) that a real client then authenticates as, and that no longer authenticates once removed; and a
change made through one agent in force on another agent sharing the metadata store within the refresh
bound (agents/security.py), measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka.protocol.admin.acl import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from scramp import ScramClient

from broker import errors
from storage.acl_model import AclBinding as StoredBinding
from storage.acl_model import Operation as StoredOp
from storage.acl_model import PatternType as StoredPattern
from storage.acl_model import Permission as StoredPermission
from storage.acl_model import ResourceType as StoredType
from tests.fixtures.kafka import RunningBroker
from tests.fixtures.principals import PASSWORDS, write_principals
from tests.kafka.wire import Wire

pytestmark = pytest.mark.integration

REFRESH_MS = 1000


def admin_conf(broker: RunningBroker, user: str = "admin", password: str | None = None) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user] if password is None else password,
    }


def scram_login(broker: RunningBroker, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> bool:
    """A full SCRAM exchange at the frame level: whether the agent accepts it."""
    with Wire(broker.port) as wire:
        wire.call(SaslHandshakeRequest[1](mechanism=mechanism), SaslHandshakeResponse)
        client = ScramClient([mechanism], user, password)
        first = wire.call(
            SaslAuthenticateRequest[2](auth_bytes=client.get_client_first().encode()),
            SaslAuthenticateResponse,
        )
        if first.error_code != errors.NONE:
            return False
        client.set_server_first(first.auth_bytes.decode())
        final = wire.call(
            SaslAuthenticateRequest[2](auth_bytes=client.get_client_final().encode()),
            SaslAuthenticateResponse,
            2,
        )
        return bool(final.error_code == errors.NONE)


def test_acls_through_the_admin_client(kafka_factory: Callable[..., Any], tmp_path: Path) -> None:
    with kafka_factory(principals_file=write_principals(tmp_path)) as broker:
        admin = AdminClient(admin_conf(broker))
        read = AclBinding(
            ResourceType.TOPIC,
            "audit.",
            ResourcePatternType.PREFIXED,
            "User:carol",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        deny = AclBinding(
            ResourceType.TOPIC,
            "audit.secret",
            ResourcePatternType.LITERAL,
            "User:carol",
            "*",
            AclOperation.ALL,
            AclPermissionType.DENY,
        )
        for future in admin.create_acls([read, deny]).values():
            assert future.result(10) is None
        everything = AclBindingFilter(
            ResourceType.ANY,
            None,
            ResourcePatternType.ANY,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        described = admin.describe_acls(everything).result(10)
        assert read in described
        assert deny in described
        seeded = [b for b in described if b.principal == "User:bob"]  # the principals file's grants
        assert {(b.name, b.operation) for b in seeded} == {
            ("orders.", AclOperation.READ),
            ("billing-", AclOperation.READ),
        }
        matching = AclBindingFilter(
            ResourceType.TOPIC,
            "audit.secret",
            ResourcePatternType.MATCH,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        assert set(admin.describe_acls(matching).result(10)) == {read, deny}
        # A binding Kafka refuses: per creation, INVALID_REQUEST (librdkafka checks some itself).
        bad = AclBinding(
            ResourceType.BROKER,
            "not-the-cluster",
            ResourcePatternType.LITERAL,
            "User:x",
            "*",
            AclOperation.ALTER,
            AclPermissionType.ALLOW,
        )
        with pytest.raises(KafkaException) as info:
            admin.create_acls([bad])[bad].result(10)
        assert info.value.args[0].code() == KafkaError.INVALID_REQUEST
        # carol's ACLs are in force: a denied READ, and the prefixed ALLOW.
        carol = AdminClient(admin_conf(broker, "carol"))
        assert admin.create_topics.__name__  # the topics exist for the check below
        broker.runtime.metadata.create_topic("audit.log", 1, {}, 0)
        broker.runtime.metadata.create_topic("audit.secret", 1, {}, 0)
        assert set(carol.list_topics(timeout=10).topics) == {"audit.log"}
        deleted = admin.delete_acls(
            [
                AclBindingFilter(
                    ResourceType.TOPIC,
                    None,
                    ResourcePatternType.ANY,
                    "User:carol",
                    None,
                    AclOperation.ANY,
                    AclPermissionType.ANY,
                )
            ]
        )
        (result,) = deleted.values()
        assert set(result.result(10)) == {read, deny}
        assert carol.list_topics(timeout=10).topics == {}
        # Without ALTER on the cluster, bob may not change ACLs.
        bob = AdminClient(admin_conf(broker, "bob"))
        with pytest.raises(KafkaException) as info:
            bob.create_acls([read])[read].result(10)
        assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_a_scram_user_added_at_run_time(kafka_factory: Callable[..., Any], tmp_path: Path) -> None:
    with kafka_factory(principals_file=write_principals(tmp_path)) as broker:
        admin = AdminClient(admin_conf(broker))
        password = b"dave-pw-61fa"
        upsert = [
            UserScramCredentialUpsertion(
                "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), password
            ),
            UserScramCredentialUpsertion(
                "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password
            ),
        ]
        for future in admin.alter_user_scram_credentials(upsert).values():
            assert future.result(10) is None
        described = admin.describe_user_scram_credentials(["dave"])["dave"].result(10)
        assert {(i.mechanism, i.iterations) for i in described.scram_credential_infos} == {
            (ScramMechanism.SCRAM_SHA_256, 8192),
            (ScramMechanism.SCRAM_SHA_512, 4096),
        }
        rows = broker.runtime.metadata.load_security().scram
        assert all(password not in (r.salt + r.stored_key + r.server_key) for r in rows)
        broker.runtime.metadata.create_topic("dave.t", 1, {}, 0)
        grant = AclBinding(
            ResourceType.TOPIC,
            "dave.",
            ResourcePatternType.PREFIXED,
            "User:dave",
            "*",
            AclOperation.WRITE,
            AclPermissionType.ALLOW,
        )
        admin.create_acls([grant])[grant].result(10)
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            producer = Producer(
                {
                    **admin_conf(broker, "admin"),
                    "sasl.mechanism": mechanism,
                    "sasl.username": "dave",
                    "sasl.password": password.decode(),
                    "linger.ms": 5,
                }
            )
            producer.produce("dave.t", value=b"hello")
            assert producer.flush(15) == 0
        assert not scram_login(broker, "dave", "wrong")
        removal = [
            UserScramCredentialDeletion("dave", m)
            for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
        ]
        for future in admin.alter_user_scram_credentials(removal).values():
            assert future.result(10) is None
        assert not scram_login(broker, "dave", password.decode())
        seen: list[KafkaError] = []
        refused = AdminClient(
            {
                **admin_conf(broker),
                "sasl.username": "dave",
                "sasl.password": password.decode(),
                "error_cb": seen.append,
            }
        )
        with pytest.raises(KafkaException):
            refused.list_topics(timeout=5)
        refused.poll(1)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in seen), seen
        # Removing a credential the user does not have: RESOURCE_NOT_FOUND.
        with pytest.raises(KafkaException) as info:
            admin.alter_user_scram_credentials(removal[:1])["dave"].result(10)
        assert info.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND


def _until(check: Callable[[], bool], limit_s: float) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < limit_s, "not seen within the bound"
        time.sleep(0.02)
    return time.monotonic() - started


def test_a_change_on_one_agent_is_seen_on_another(kafka_factory: Callable[..., Any], tmp_path: Path) -> None:
    """Two agents on one metadata store: a user and an ACL added through one are in force on the other
    within the refresh interval plus a reload; so is the user's removal."""
    principals = write_principals(tmp_path)
    bound_s = REFRESH_MS / 1000 + 1.0
    with (
        kafka_factory(principals_file=principals, security_refresh_ms=REFRESH_MS) as first,
        kafka_factory(principals_file=principals, security_refresh_ms=REFRESH_MS) as second,
    ):
        admin = AdminClient(admin_conf(first))
        upsert = UserScramCredentialUpsertion(
            "erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"erin-pw-0c2d"
        )
        admin.alter_user_scram_credentials([upsert])["erin"].result(10)
        assert scram_login(first, "erin", "erin-pw-0c2d")  # the agent that changed it: at once
        took = _until(lambda: scram_login(second, "erin", "erin-pw-0c2d"), bound_s)
        grant = AclBinding(
            ResourceType.BROKER,
            "kafka-cluster",
            ResourcePatternType.LITERAL,
            "User:erin",
            "*",
            AclOperation.DESCRIBE,
            AclPermissionType.ALLOW,
        )
        admin.create_acls([grant])[grant].result(10)
        second_security = second.runtime.security
        assert second_security is not None
        took_acl = _until(lambda: grant_seen(second), bound_s)
        admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_256)]
        )["erin"].result(10)
        took_removal = _until(lambda: not scram_login(second, "erin", "erin-pw-0c2d"), bound_s)
        print(
            f"seen on the other agent after {took:.3f} s (user), {took_acl:.3f} s (ACL),"
            f" {took_removal:.3f} s (removal)"
        )


def grant_seen(broker: RunningBroker) -> bool:
    security = broker.runtime.security
    assert security is not None
    return any(b.principal == "User:erin" for b in security.acls)


@pytest.mark.parametrize("stored", [StoredType.SUBJECT, StoredType.TABLE])
def test_stratas_own_resource_acls_are_not_kafkas(broker: RunningBroker, stored: StoredType) -> None:
    """SUBJECT (the schema registry's resource type) and TABLE (the lake's Iceberg tables), Strata's own,
    never cross the Kafka door: a binding or filter naming their number is INVALID_REQUEST, as any type
    Kafka lacks, and a stored binding of theirs is neither described nor deleted by filters that match any
    resource type."""
    subject = StoredBinding(
        stored,
        "orders.",
        StoredPattern.PREFIXED,
        "User:x",
        "*",
        StoredOp.READ,
        StoredPermission.ALLOW,
    )
    broker.runtime.metadata.create_acls([subject])
    number = int(stored)
    any_filter = {"resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None}
    any_filter |= {"host_filter": None, "operation": 1, "permission_type": 1}
    with Wire(broker.port) as wire:
        creation = CreateAclsRequest[1].AclCreation(
            resource_type=number,
            resource_name="orders.",
            resource_pattern_type=3,
            principal="User:x",
            host="*",
            operation=3,
            permission_type=3,
        )
        created = wire.call(CreateAclsRequest[1](creations=[creation]), CreateAclsResponse)
        assert created.results[0].error_code == errors.INVALID_REQUEST
        named = wire.call(
            DescribeAclsRequest[1](resource_type_filter=number, **any_filter), DescribeAclsResponse
        )
        assert named.error_code == errors.INVALID_REQUEST
        described = wire.call(
            DescribeAclsRequest[1](resource_type_filter=1, **any_filter), DescribeAclsResponse
        )
        assert (described.error_code, described.resources) == (errors.NONE, [])
        every = DeleteAclsRequest[1].DeleteAclsFilter(resource_type_filter=1, **any_filter)
        deleted = wire.call(DeleteAclsRequest[1](filters=[every]), DeleteAclsResponse)
        assert deleted.filter_results[0].matching_acls == []
    assert list(broker.runtime.metadata.load_security().acls) == [subject]
