"""Authentication and per-principal permissions on the HTTP door, and one principal on both doors: the
principals file (tests/fixtures/principals.py) serves HTTP Basic, bearer tokens and Kafka SASL from the same
entries.

Every denied route answers 403 with a stable code (40301 topic, 40302 group) and changes nothing.
"""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.fixtures.principals import BOB_TOKEN, PASSWORDS, write_principals
from tests.fixtures.processes import free_port
from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration


def basic(user: str, password: str | None = None) -> dict[str, str]:
    secret = PASSWORDS[user] if password is None else password
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()}


@pytest.fixture
def secured(server_factory: Callable[..., Any], tmp_path: Path) -> Iterator[RunningServer]:
    with server_factory(principals_file=write_principals(tmp_path), kafka_port=0) as srv:
        yield srv


def test_credentials_are_required_and_checked(secured: RunningServer) -> None:
    c = secured.client
    assert c.get("/healthz").status_code == 200  # probes stay open
    assert c.get("/metrics").status_code == 200
    for headers in (
        {},
        basic("alice", "wrong"),
        basic("nobody", "x"),
        {"Authorization": "Bearer nope"},
        {"Authorization": "Basic !!!not-base64"},
        {"Authorization": "Digest abc"},
    ):
        answer = c.get("/v1/topics", headers=headers)
        assert answer.status_code == 401, headers
        assert answer.json()["error_code"] == 40101
        assert "Bearer" in answer.headers["WWW-Authenticate"]
    assert c.get("/v1/topics", headers=basic("alice")).status_code == 200
    assert c.get("/v1/topics", headers={"Authorization": f"Bearer {BOB_TOKEN}"}).status_code == 200


def test_every_denied_route_is_403_and_changes_nothing(secured: RunningServer) -> None:
    c = secured.client
    admin, bob = basic("admin"), {"Authorization": f"Bearer {BOB_TOKEN}"}
    for name in ("orders.a", "secret"):
        assert c.post("/v1/topics", json={"name": name, "partitions": 1}, headers=admin).status_code == 201
        produced = c.post(f"/v1/topics/{name}/records", json={"records": [{"value": "v"}]}, headers=admin)
        assert produced.status_code == 200
    offsets = {"offsets": [{"topic": "orders.a", "partition": 0, "offset": 1}]}
    assert c.put("/v1/groups/billing-a/offsets", json=offsets, headers=admin).status_code == 200
    assert c.put("/v1/groups/other/offsets", json=offsets, headers=admin).status_code == 200
    secret_offsets = {"offsets": [{"topic": "secret", "partition": 0, "offset": 1}]}
    assert c.put("/v1/groups/billing-a/offsets", json=secret_offsets, headers=admin).status_code == 200

    denied: list[tuple[str, str, dict[str, Any] | None, int]] = [
        ("POST", "/v1/topics", {"name": "orders.b", "partitions": 1}, 40301),
        ("POST", "/v1/topics/orders.a/records", {"records": [{"value": "x"}]}, 40301),
        ("PATCH", "/v1/topics/orders.a/configs", {"configs": {"retention.ms": "1000"}}, 40301),
        ("POST", "/v1/topics/orders.a/partitions", {"partitions": 2}, 40301),
        ("DELETE", "/v1/topics/orders.a", None, 40301),
        ("POST", "/v1/topics/orders.a/compact", None, 40301),
        ("GET", "/v1/topics/secret", None, 40301),
        ("GET", "/v1/topics/secret/partitions/0/records", None, 40301),
        ("GET", "/v1/topics/secret/partitions/0/offsets", None, 40301),
        ("GET", "/v1/groups/other/offsets", None, 40302),
        ("PUT", "/v1/groups/other/offsets", offsets, 40302),
        (
            "PUT",
            "/v1/groups/billing-a/offsets",
            {"offsets": [{"topic": "secret", "partition": 0, "offset": 0}]},
            40301,
        ),
    ]
    for method, path, body, code in denied:
        answer = c.request(method, path, json=body, headers=bob)
        assert answer.status_code == 403, (method, path, answer.text)
        assert answer.json()["error_code"] == code, (method, path)
        assert "bob" in answer.json()["message"]
    # What bob may do works, and shows only what he may see.
    assert c.get("/v1/topics", headers=bob).json()["topics"] == ["orders.a"]
    assert c.get("/v1/topics/orders.a/partitions/0/records", headers=bob).status_code == 200
    mine = c.get("/v1/groups/billing-a/offsets", headers=bob).json()["offsets"]
    assert mine == [{"topic": "orders.a", "partition": 0, "offset": 1}]
    # Nothing denied changed anything.
    assert c.get("/v1/topics", headers=admin).json()["topics"] == ["orders.a", "secret"]
    topic = c.get("/v1/topics/orders.a", headers=admin).json()
    assert len(topic["partitions"]) == 1
    assert topic["partitions"][0]["high_watermark"] == 1
    assert "retention.ms" not in {k for k, v in topic["configs"].items() if v == "1000"}
    assert c.get("/v1/groups/other/offsets", headers=admin).json()["offsets"][0]["offset"] == 1
    got = c.get("/v1/groups/billing-a/offsets", headers=admin).json()["offsets"]
    assert {(o["topic"], o["offset"]) for o in got} == {("orders.a", 1), ("secret", 1)}


def test_one_principal_on_both_doors(secured: RunningServer) -> None:
    """alice creates a topic over HTTP (Basic), produces over Kafka (SASL/SCRAM), and bob reads it back over
    HTTP with his token; the group offset bob commits over Kafka is visible over HTTP."""
    c = secured.client
    assert (
        c.post(
            "/v1/topics", json={"name": "orders.both", "partitions": 1}, headers=basic("alice")
        ).status_code
        == 201
    )
    sasl = {
        "bootstrap.servers": secured.kafka_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
    }
    producer = Producer(
        {**sasl, "sasl.username": "alice", "sasl.password": PASSWORDS["alice"], "linger.ms": 5}
    )
    for i in range(3):
        producer.produce("orders.both", value=f"from-kafka-{i}".encode())
    assert producer.flush(30) == 0
    fetched = c.get(
        "/v1/topics/orders.both/partitions/0/records", headers={"Authorization": f"Bearer {BOB_TOKEN}"}
    ).json()
    assert [r["value"] for r in fetched["records"]] == [f"from-kafka-{i}" for i in range(3)]
    consumer = Consumer(
        {**sasl, "sasl.username": "bob", "sasl.password": PASSWORDS["bob"], "group.id": "billing-both"}
    )
    try:
        consumer.commit(offsets=[TopicPartition("orders.both", 0, 2)], asynchronous=False)
    finally:
        consumer.close()
    offsets = c.get("/v1/groups/billing-both/offsets", headers=basic("bob")).json()["offsets"]
    assert offsets == [{"topic": "orders.both", "partition": 0, "offset": 2}]


def test_secrets_never_reach_the_log_or_the_metrics(tmp_path: Path) -> None:
    """A strata serve process with access logging on, driven through every authentication path with right
    and wrong secrets: no password or token appears in its output or in /metrics."""
    http_port, kafka_port = free_port(), free_port()
    principals = write_principals(tmp_path)
    log_path = tmp_path / "serve.log"
    strata = str(Path(sys.executable).parent / "strata")
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                strata, "serve", "--data-dir", str(tmp_path / "data"), "--host", "127.0.0.1",
                "--port", str(http_port), "--kafka-port", str(kafka_port), "--schema-registry-port", "0",
                "--principals-file", principals,
                "--api-tokens", "legacy-token-9d1c", "--access-log", "--log-level", "debug",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{http_port}"
            deadline = time.monotonic() + 30
            while True:
                assert proc.poll() is None, log_path.read_text()
                try:
                    if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.2)
            wrong = "wrong-pw-3c7e"
            attempts = [
                basic("alice"),
                basic("alice", wrong),
                {"Authorization": f"Bearer {BOB_TOKEN}"},
                {"Authorization": "Bearer legacy-token-9d1c"},
                {"Authorization": f"Bearer {wrong}"},
            ]
            for headers in attempts:
                httpx.get(f"{url}/v1/topics", headers=headers, timeout=5)
            for mechanism in ("PLAIN", "SCRAM-SHA-512"):
                for password in (PASSWORDS["alice"], wrong):
                    producer = Producer(
                        {
                            "bootstrap.servers": f"127.0.0.1:{kafka_port}",
                            "security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanism": mechanism,
                            "sasl.username": "alice",
                            "sasl.password": password,
                            "message.timeout.ms": 3000,
                        }
                    )
                    producer.produce("orders.log", value=b"x")
                    producer.flush(5)
            metrics = httpx.get(f"{url}/metrics", timeout=5).text
        finally:
            proc.terminate()
            proc.wait(15)
    output = log_path.read_text()
    assert "authenticated as 'alice'" in output  # the log says who, and only who
    for secret in (*PASSWORDS.values(), BOB_TOKEN, "legacy-token-9d1c", wrong):
        assert secret not in output, secret
        assert secret not in metrics, secret
