"""SASL on the Kafka listener and per-principal permissions, with real clients and, where exact error codes
matter, at the frame level.

The principals (tests/fixtures/principals.py): admin (superuser), alice (admin on orders.*, groups
billing-*), bob (read orders.*, groups billing-*) and carol (nothing).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka.protocol.admin.configs import DescribeConfigsRequest, DescribeConfigsResponse
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from scramp import ScramClient

from broker import errors
from tests.fixtures.docs import DOCS, blocks, section
from tests.fixtures.kafka import RunningBroker
from tests.fixtures.principals import PASSWORDS, write_principals
from tests.kafka.test_tls import cert  # noqa: F401  (the certificate fixture)
from tests.kafka.wire import Wire

pytestmark = pytest.mark.integration

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@pytest.fixture
def secured(kafka_factory: Callable[..., Any], tmp_path: Path) -> Iterator[RunningBroker]:
    with kafka_factory(principals_file=write_principals(tmp_path)) as running:
        yield running


def sasl(broker: RunningBroker, user: str, mechanism: str = "SCRAM-SHA-512", **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
        **extra,
    }


def authenticate(wire: Wire, user: str, password: str | None = None) -> SaslAuthenticateResponse:
    """SASL/PLAIN at the frame level; the SaslAuthenticate answer."""
    handshake = wire.call(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse)
    assert handshake.error_code == errors.NONE
    assert set(handshake.mechanisms) == set(MECHANISMS)
    token = f"\0{user}\0{PASSWORDS[user] if password is None else password}".encode()
    return wire.call(SaslAuthenticateRequest[2](auth_bytes=token), SaslAuthenticateResponse)


def _make_topics(broker: RunningBroker, *names: str) -> None:
    admin = AdminClient(sasl(broker, "admin"))
    for future in admin.create_topics([NewTopic(n, num_partitions=1) for n in names]).values():
        future.result(10)
    producer = Producer(sasl(broker, "admin", **{"linger.ms": 5}))
    for name in names:
        for i in range(3):
            producer.produce(name, key=b"k", value=f"{name}-{i}".encode())
    assert producer.flush(30) == 0


# --- authentication -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_authenticates_with_each_mechanism(secured: RunningBroker, mechanism: str) -> None:
    topic = f"orders.{mechanism.lower()}"
    admin = AdminClient(sasl(secured, "alice", mechanism))
    admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(10)
    producer = Producer(sasl(secured, "alice", mechanism, **{"linger.ms": 5}))
    for i in range(10):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer(
        sasl(secured, "bob", mechanism, **{"group.id": "billing-1", "auto.offset.reset": "earliest"})
    )
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.time() + 30
        while len(got) < 10 and time.time() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert sorted(got) == sorted(f"v{i}".encode() for i in range(10))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def test_kafka_python_over_sasl_ssl(kafka_factory: Callable[..., Any], tmp_path: Path, cert: Any) -> None:  # noqa: F811
    crt, key = cert
    with kafka_factory(principals_file=write_principals(tmp_path), tls_cert_file=crt, tls_key_file=key) as b:
        common: dict[str, Any] = {
            "bootstrap_servers": b.bootstrap,
            "security_protocol": "SASL_SSL",
            "ssl_cafile": crt,
            "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": "alice",
            "sasl_plain_password": PASSWORDS["alice"],
        }
        producer = KafkaProducer(**common)
        try:
            for i in range(5):
                producer.send("orders.kp", key=b"k", value=f"sealed-{i}".encode())
            producer.flush(30)
        finally:
            producer.close()
        consumer = KafkaConsumer(
            "orders.kp", auto_offset_reset="earliest", consumer_timeout_ms=10_000, **common
        )
        try:
            got = [m.value for _, m in zip(range(5), consumer, strict=False)]
        finally:
            consumer.close()
        assert got == [f"sealed-{i}".encode() for i in range(5)]


def test_wrong_password_is_refused_and_the_connection_closed(secured: RunningBroker) -> None:
    for user, password in (("alice", "not-it"), ("nobody", "whatever")):
        with Wire(secured.port) as wire:
            answer = authenticate(wire, user, password)
            assert answer.error_code == errors.SASL_AUTHENTICATION_FAILED
            assert "invalid username or password" in answer.error_message
            assert wire.closed_by_server()
    # A real client sees an authentication error, not a hang.
    seen: list[KafkaError] = []
    conf = {**sasl(secured, "alice"), "sasl.password": "not-it", "error_cb": seen.append}
    admin = AdminClient(conf)
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    admin.poll(1)  # serves error_cb
    assert any(e.code() == KafkaError._AUTHENTICATION for e in seen), seen


def test_scram_with_a_wrong_password_fails_at_the_proof(secured: RunningBroker) -> None:
    with Wire(secured.port) as wire:
        wire.call(SaslHandshakeRequest[1](mechanism="SCRAM-SHA-256"), SaslHandshakeResponse)
        client = ScramClient(["SCRAM-SHA-256"], "alice", "not-it")
        first = wire.call(
            SaslAuthenticateRequest[2](auth_bytes=client.get_client_first().encode()),
            SaslAuthenticateResponse,
        )
        assert first.error_code == errors.NONE
        client.set_server_first(first.auth_bytes.decode())
        final = wire.call(
            SaslAuthenticateRequest[2](auth_bytes=client.get_client_final().encode()),
            SaslAuthenticateResponse,
            correlation_id=2,
        )
        assert final.error_code == errors.SASL_AUTHENTICATION_FAILED
        assert wire.closed_by_server()


def test_nothing_but_api_versions_and_sasl_before_authentication(secured: RunningBroker) -> None:
    with Wire(secured.port) as wire:
        versions = wire.call(
            ApiVersionsRequest[3](client_software_name="t", client_software_version="1"), ApiVersionsResponse
        )
        assert versions.error_code == errors.NONE
        wire.send(wire.frame(MetadataRequest[12](topics=None), 2))
        assert wire.closed_by_server()
    with Wire(secured.port) as wire:  # a frame too large for an unauthenticated client
        wire.send(b"\x00\x10\x00\x00" + b"\x00" * 64)
        assert wire.closed_by_server()
    with Wire(secured.port) as wire:
        answer = wire.call(SaslHandshakeRequest[1](mechanism="GSSAPI"), SaslHandshakeResponse)
        assert answer.error_code == errors.UNSUPPORTED_SASL_MECHANISM
        assert wire.closed_by_server()
    with Wire(secured.port) as wire:  # SaslAuthenticate without a handshake
        answer = wire.call(SaslAuthenticateRequest[2](auth_bytes=b"\0a\0b"), SaslAuthenticateResponse)
        assert answer.error_code == errors.ILLEGAL_SASL_STATE
        assert wire.closed_by_server()
    with Wire(secured.port) as wire:  # after authentication, the same requests are served
        assert authenticate(wire, "admin").error_code == errors.NONE
        metadata = wire.call(MetadataRequest[12](topics=None), MetadataResponse, correlation_id=3)
        assert metadata.brokers


def test_v0_handshake_then_bare_tokens(secured: RunningBroker) -> None:
    """Kafka before 1.0: after SaslHandshake v0 the token travels as a bare frame, answered by one."""
    with Wire(secured.port) as wire:
        answer = wire.call(SaslHandshakeRequest[0](mechanism="PLAIN"), SaslHandshakeResponse)
        assert answer.error_code == errors.NONE
        token = f"\0bob\0{PASSWORDS['bob']}".encode()
        wire.send(len(token).to_bytes(4, "big") + token)
        assert wire.recv_frame() == b""  # PLAIN's empty server token
        assert wire.call(MetadataRequest[12](topics=None), MetadataResponse, correlation_id=2).brokers
    with Wire(secured.port) as wire:
        wire.call(SaslHandshakeRequest[0](mechanism="PLAIN"), SaslHandshakeResponse)
        token = b"\0bob\0wrong"
        wire.send(len(token).to_bytes(4, "big") + token)
        assert wire.closed_by_server()  # v0 has no error field: the connection closes


def _documented_kcat_flags(bootstrap: str, ca: str, user: str) -> list[str]:
    """The flags of docs/kafka-clients.md's kcat command over SASL_SSL, with this agent's address, this
    certificate and this principal in place of the page's."""
    section_text = section(DOCS / "kafka-clients.md", "## TLS and SASL")
    (command,) = [b for b in blocks(section_text, "sh") if "SASL_SSL" in b]
    argv = shlex.split(command.replace("\\\n", " "))
    assert argv[0] == "kcat", argv
    assert argv[-1] == "-L", argv
    ours = {
        "127.0.0.1:9092": bootstrap,
        "ssl.ca.location=cert.pem": f"ssl.ca.location={ca}",
        "sasl.username=orders-service": f"sasl.username={user}",
        "sasl.password=also-change-me": f"sasl.password={PASSWORDS[user]}",
    }
    assert set(ours) <= set(argv), f"the page's command changed: {argv}"
    return [ours.get(arg, arg) for arg in argv[1:-1]]


def test_kcat_over_sasl_ssl(kafka_factory: Callable[..., Any], tmp_path: Path, cert: Any) -> None:  # noqa: F811
    """Debian's kcat on librdkafka 2.0.2, which reads "SASL handshake supported" from SaslHandshake v0
    being advertised, with docs/kafka-clients.md's flags."""
    crt, key = cert
    with kafka_factory(principals_file=write_principals(tmp_path), tls_cert_file=crt, tls_key_file=key) as b:
        exe = shutil.which("kcat")
        assert exe is not None, "kcat is not installed (the Makefile's kcat step: apt-get install kcat)"
        flags = _documented_kcat_flags(b.bootstrap, crt, "alice")
        listed = subprocess.run([exe, *flags, "-L"], capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0, listed.stderr
        assert f" at {b.bootstrap}" in listed.stdout
        produced = subprocess.run(
            [exe, *flags, "-P", "-t", "orders.kcat", "-K:"],
            input="k1:one\nk2:two\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert produced.returncode == 0, produced.stderr
        consumed = subprocess.run(
            [exe, *flags, "-C", "-t", "orders.kcat", "-o", "beginning", "-e", "-q", "-f", "%k=%s\n"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert consumed.returncode == 0, consumed.stderr
        assert consumed.stdout.split() == ["k1=one", "k2=two"]
        wrong = [f if not f.startswith("sasl.password=") else "sasl.password=nope" for f in flags]
        refused = subprocess.run([exe, *wrong, "-L", "-m", "5"], capture_output=True, text=True, timeout=60)
        assert refused.returncode != 0
        assert "Authentication" in refused.stderr


def test_a_plaintext_listener_answers_sasl_without_closing(broker: RunningBroker) -> None:
    with Wire(broker.port) as wire:
        answer = wire.call(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse)
        assert answer.error_code == errors.ILLEGAL_SASL_STATE
        assert wire.call(MetadataRequest[12](topics=None), MetadataResponse, correlation_id=2).brokers


# --- permissions: real clients --------------------------------------------------------------------------


def test_denied_with_real_clients(secured: RunningBroker) -> None:
    _make_topics(secured, "orders.x", "secret")
    bob = AdminClient(sasl(secured, "bob"))
    # Metadata lists only the topics bob may describe.
    assert set(bob.list_topics(timeout=10).topics) == {"orders.x"}
    # Produce without write.
    reports: list[KafkaError | None] = []
    producer = Producer(sasl(secured, "bob", **{"linger.ms": 5}))
    producer.produce("orders.x", value=b"nope", on_delivery=lambda err, _msg: reports.append(err))
    producer.flush(15)
    assert reports
    assert reports[0] is not None
    assert reports[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Admin operations without admin.
    for future in bob.create_topics([NewTopic("orders.new", num_partitions=1)]).values():
        with pytest.raises(KafkaException) as info:
            future.result(10)
        assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    for future in bob.delete_topics(["orders.x"]).values():
        with pytest.raises(KafkaException) as info:
            future.result(10)
        assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    for future in bob.create_partitions([NewPartitions("orders.x", 3)]).values():
        with pytest.raises(KafkaException) as info:
            future.result(10)
        assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    resource = ConfigResource(
        "topic",
        "orders.x",
        incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in bob.incremental_alter_configs([resource]).values():
        with pytest.raises(KafkaException) as info:
            future.result(10)
        assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Reading a topic outside bob's prefixes, and a group outside them.
    assert KafkaError.TOPIC_AUTHORIZATION_FAILED in _subscribe_errors(secured, "billing-2", "secret")
    assert KafkaError.GROUP_AUTHORIZATION_FAILED in _subscribe_errors(secured, "other-group", "orders.x")
    # The data did not change: the topics are as admin left them.
    admin = AdminClient(sasl(secured, "admin"))
    topics = admin.list_topics(timeout=10).topics
    assert set(topics) == {"orders.x", "secret"}
    assert len(topics["orders.x"].partitions) == 1


def _subscribe_errors(broker: RunningBroker, group: str, topic: str) -> set[int]:
    """The error codes bob's consumer in ``group`` first sees after subscribing to ``topic``."""
    consumer = Consumer(sasl(broker, "bob", **{"group.id": group}))
    try:
        consumer.subscribe([topic])
        codes: set[int] = set()
        deadline = time.time() + 15
        while not codes and time.time() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is not None:
                codes.add(msg.error().code())
        return codes
    finally:
        consumer.close()


def test_idempotent_producers_with_and_without_write(secured: RunningBroker) -> None:
    """carol's delivery fails (librdkafka checks the topic's metadata before it asks for a producer id;
    InitProducerId's own CLUSTER_AUTHORIZATION_FAILED is checked at the frame level below)."""
    _make_topics(secured, "orders.idem")
    reports: list[KafkaError | None] = []
    producer = Producer(sasl(secured, "carol", **{"enable.idempotence": True}))
    producer.produce("orders.idem", value=b"nope", on_delivery=lambda err, _msg: reports.append(err))
    producer.flush(15)
    assert len(reports) == 1
    assert reports[0] is not None
    assert reports[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    ok = Producer(sasl(secured, "alice", **{"enable.idempotence": True}))
    ok.produce("orders.idem", value=b"yes")
    assert ok.flush(15) == 0


# --- permissions: every other denied path, at the frame level -------------------------------------------


def test_denied_paths_at_the_frame_level(secured: RunningBroker) -> None:
    _make_topics(secured, "orders.w", "secret")
    with Wire(secured.port) as admin:  # a group with offsets for both topics, committed by admin
        assert authenticate(admin, "admin").error_code == errors.NONE
        commit = _commit("billing-w", [("orders.w", 1), ("secret", 1)])
        assert {
            p.error_code
            for t in admin.call(commit, OffsetCommitResponse, correlation_id=3).topics
            for p in t.partitions
        } == {0}
        commit = _commit("other-g", [("orders.w", 1)])
        assert (
            admin.call(commit, OffsetCommitResponse, correlation_id=4).topics[0].partitions[0].error_code == 0
        )
    with Wire(secured.port) as wire:
        assert authenticate(wire, "bob").error_code == errors.NONE
        n = iter(range(10, 100))

        def call(request: Any, response: Any) -> Any:
            return wire.call(request, response, correlation_id=next(n))

        metadata = call(
            MetadataRequest[12](topics=[MetadataRequest[12].MetadataRequestTopic(name="secret")]),
            MetadataResponse,
        )
        assert metadata.topics[0].error_code == errors.TOPIC_AUTHORIZATION_FAILED
        listed = call(
            ListOffsetsRequest[7](
                replica_id=-1,
                isolation_level=0,
                topics=[_lo_topic("secret"), _lo_topic("orders.w")],
            ),
            ListOffsetsResponse,
        )
        assert [t.partitions[0].error_code for t in listed.topics] == [errors.TOPIC_AUTHORIZATION_FAILED, 0]
        fetched = call(_fetch(["secret", "orders.w"]), FetchResponse)
        codes = {t.topic: t.partitions[0].error_code for t in fetched.responses}
        assert codes == {"secret": errors.TOPIC_AUTHORIZATION_FAILED, "orders.w": 0}
        assert next(t for t in fetched.responses if t.topic == "orders.w").partitions[0].records
        described = call(
            DescribeConfigsRequest[4](
                resources=[
                    DescribeConfigsRequest[4].DescribeConfigsResource(
                        resource_type=2, resource_name="secret", configuration_keys=None
                    )
                ],
                include_synonyms=False,
                include_documentation=False,
            ),
            DescribeConfigsResponse,
        )
        assert described.results[0].error_code == errors.TOPIC_AUTHORIZATION_FAILED
        # Groups.
        coordinator = call(FindCoordinatorRequest[3](key="other-g", key_type=0), FindCoordinatorResponse)
        assert coordinator.error_code == errors.GROUP_AUTHORIZATION_FAILED
        commit = call(_commit("other-g", [("orders.w", 2)]), OffsetCommitResponse)
        assert commit.topics[0].partitions[0].error_code == errors.GROUP_AUTHORIZATION_FAILED
        commit = call(_commit("billing-w", [("secret", 2), ("orders.w", 2)]), OffsetCommitResponse)
        codes = {t.name: t.partitions[0].error_code for t in commit.topics}
        assert codes == {"secret": errors.TOPIC_AUTHORIZATION_FAILED, "orders.w": 0}
        fetched_offsets = call(
            OffsetFetchRequest[7](group_id="billing-w", topics=None, require_stable=False),
            OffsetFetchResponse,
        )
        assert {t.name for t in fetched_offsets.topics} == {"orders.w"}
        fetched_offsets = call(
            OffsetFetchRequest[7](group_id="other-g", topics=None, require_stable=False), OffsetFetchResponse
        )
        assert fetched_offsets.error_code == errors.GROUP_AUTHORIZATION_FAILED
        groups = call(ListGroupsRequest[4](states_filter=[]), ListGroupsResponse)
        assert {g.group_id for g in groups.groups} == {"billing-w"}
        described_groups = call(
            DescribeGroupsRequest[5](groups=["other-g"], include_authorized_operations=False),
            DescribeGroupsResponse,
        )
        assert described_groups.groups[0].error_code == errors.GROUP_AUTHORIZATION_FAILED
        deleted = call(DeleteGroupsRequest[2](groups_names=["billing-w"]), DeleteGroupsResponse)
        assert deleted.results[0].error_code == errors.GROUP_AUTHORIZATION_FAILED
        offset_delete = call(
            OffsetDeleteRequest[0](
                group_id="billing-w",
                topics=[
                    OffsetDeleteRequest[0].OffsetDeleteRequestTopic(
                        name="orders.w",
                        partitions=[
                            OffsetDeleteRequest[0].OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(
                                partition_index=0
                            )
                        ],
                    )
                ],
            ),
            OffsetDeleteResponse,
        )
        assert offset_delete.error_code == errors.GROUP_AUTHORIZATION_FAILED
        producer_id = call(
            InitProducerIdRequest[4](
                transactional_id=None, transaction_timeout_ms=-1, producer_id=-1, producer_epoch=-1
            ),
            InitProducerIdResponse,
        )
        assert producer_id.error_code == errors.CLUSTER_AUTHORIZATION_FAILED
    # Nothing denied changed a stored offset.
    with Wire(secured.port) as admin:
        assert authenticate(admin, "admin").error_code == errors.NONE
        for group, want in (("billing-w", {("orders.w", 2), ("secret", 1)}), ("other-g", {("orders.w", 1)})):
            got = admin.call(
                OffsetFetchRequest[7](group_id=group, topics=None, require_stable=False),
                OffsetFetchResponse,
                correlation_id=5,
            )
            assert {(t.name, t.partitions[0].committed_offset) for t in got.topics} == want


def _commit(group: str, offsets: list[tuple[str, int]]) -> Any:
    request = OffsetCommitRequest[8]
    topic = request.OffsetCommitRequestTopic
    return request(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            topic(
                name=name,
                partitions=[
                    topic.OffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    )
                ],
            )
            for name, offset in offsets
        ],
    )


def _lo_topic(name: str) -> Any:
    topic = ListOffsetsRequest[7].ListOffsetsTopic
    return topic(
        name=name,
        partitions=[topic.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-2)],
    )


def _fetch(names: list[str]) -> Any:
    request = FetchRequest[12]
    topic = request.FetchTopic
    return request(
        replica_id=-1,
        max_wait_ms=100,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            topic(
                topic=name,
                partitions=[
                    topic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
            for name in names
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


# --- what the review found --------------------------------------------------------------------------------


def _null_string(frame: bytes, text: str) -> bytes:
    """``frame`` with its first int16-length string ``text`` (after the size and header) made null."""
    encoded = len(text).to_bytes(2, "big") + text.encode()
    at = frame.index(encoded, 8)
    body = frame[4:at] + (-1).to_bytes(2, "big", signed=True) + frame[at + len(encoded) :]
    return len(body).to_bytes(4, "big") + body


def test_null_names_are_denied_not_crashes(secured: RunningBroker) -> None:
    """A null group id or topic name from a principal with grants is an authorization failure answered
    in the request's own shape, not an exception that closes the connection."""
    lo = ListOffsetsRequest[1]
    cases: list[tuple[Any, Any, str]] = [
        (FindCoordinatorRequest[1](key="GROUPX", key_type=0), FindCoordinatorResponse, "GROUPX"),
        (OffsetFetchRequest[1](group_id="GROUPX", topics=[]), OffsetFetchResponse, "GROUPX"),
        (DescribeGroupsRequest[0](groups=["GROUPX"]), DescribeGroupsResponse, "GROUPX"),
        (
            lo(
                replica_id=-1,
                topics=[
                    lo.ListOffsetsTopic(
                        name="TOPICX",
                        partitions=[
                            lo.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1)
                        ],
                    )
                ],
            ),
            ListOffsetsResponse,
            "TOPICX",
        ),
    ]
    for request, response_class, text in cases:
        with Wire(secured.port) as wire:
            assert authenticate(wire, "bob").error_code == errors.NONE
            wire.send(_null_string(Wire.frame(request, 7), text))
            answer = Wire.decode(wire.recv_frame(), response_class, request.API_VERSION, 7)
            assert answer is not None


def test_a_null_sasl_token_is_an_authentication_failure(secured: RunningBroker) -> None:
    with Wire(secured.port) as wire:
        wire.call(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse)
        request = SaslAuthenticateRequest[1](auth_bytes=b"\x01\x02\x03\x04")
        frame = Wire.frame(request, 2)
        at = frame.index(b"\x00\x00\x00\x04\x01\x02\x03\x04")
        body = frame[4:at] + b"\xff\xff\xff\xff"  # int32 length -1: a null token
        wire.send(len(body).to_bytes(4, "big") + body)
        answer = Wire.decode(wire.recv_frame(), SaslAuthenticateResponse, 1, 2)
        assert answer.error_code == errors.SASL_AUTHENTICATION_FAILED
        assert wire.closed_by_server()


def test_a_short_v0_token_is_served(kafka_factory: Callable[..., Any], tmp_path: Path) -> None:
    """A bare token shorter than a request header (user "ab", password "xyz": 8 bytes) is a token, not a
    malformed frame."""
    principals = tmp_path / "short.toml"
    principals.write_text('[principals.ab]\npassword = "xyz"\nsuperuser = true\n')
    with kafka_factory(principals_file=str(principals)) as broker, Wire(broker.port) as wire:
        wire.call(SaslHandshakeRequest[0](mechanism="PLAIN"), SaslHandshakeResponse)
        token = b"\0ab\0xyz"
        wire.send(len(token).to_bytes(4, "big") + token)
        assert wire.recv_frame() == b""
        assert wire.call(MetadataRequest[12](topics=None), MetadataResponse, correlation_id=2).brokers


def test_scram_does_not_tell_which_names_exist(secured: RunningBroker) -> None:
    """An unknown name's salt is the same on every attempt, as a real principal's is, and costs no
    password hashing: the server-first messages of two attempts cannot tell the two apart."""

    def server_first(user: str) -> str:
        with Wire(secured.port) as wire:
            wire.call(SaslHandshakeRequest[1](mechanism="SCRAM-SHA-256"), SaslHandshakeResponse)
            client = ScramClient(["SCRAM-SHA-256"], user, "whatever")
            first = wire.call(
                SaslAuthenticateRequest[2](auth_bytes=client.get_client_first().encode()),
                SaslAuthenticateResponse,
            )
            assert first.error_code == errors.NONE
            text: str = first.auth_bytes.decode()
            return text

    def salt(message: str) -> str:
        return next(part[2:] for part in message.split(",") if part.startswith("s="))

    assert salt(server_first("alice")) == salt(server_first("alice"))
    assert salt(server_first("nobody")) == salt(server_first("nobody"))
    assert salt(server_first("nobody")) != salt(server_first("somebody-else"))


def test_unauthenticated_connections_cannot_starve_producers(
    kafka_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """Sockets that declare big frames and never log in take from their own small budget, not the produce
    buffer: an authenticated producer still gets through, and such sockets are closed once that budget is
    full or their time to authenticate has passed."""
    with kafka_factory(principals_file=write_principals(tmp_path), buffer_bytes=4 * 1024 * 1024) as broker:
        idle = [Wire(broker.port) for _ in range(12)]
        try:
            for wire in idle:
                wire.send((512 * 1024).to_bytes(4, "big") + b"\x00\x12")  # a big frame, never finished
            time.sleep(0.3)
            closed = sum(1 for wire in idle if wire.closed_by_server())
            assert closed >= 12 - 8  # 4 MiB of unauthenticated frames at most: 8 of 512 KiB
            producer = Producer(sasl(broker, "alice", **{"linger.ms": 5, "message.timeout.ms": 10_000}))
            producer.produce("orders.starve", value=b"through")
            assert producer.flush(15) == 0
        finally:
            for wire in idle:
                wire.close()
