"""The HTTP door's security: the ACL and user routes, HTTP Basic for SCRAM users stored at run time,
Idempotency-Keys scoped by principal, /readyz telling why only to who may know, and `strata serve`
refusing to leave the Kafka door open beside an authenticating HTTP door."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from storage.errors import SettingsError
from strata.runtime import check_no_open_door
from strata.settings import Settings
from tests.fixtures.principals import PASSWORDS, write_principals
from tests.fixtures.processes import free_port
from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration


def basic(user: str, password: str | None = None) -> dict[str, str]:
    secret = PASSWORDS[user] if password is None else password
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()}


ADMIN = basic("admin")


@pytest.fixture
def secured(server_factory: Callable[..., Any], tmp_path: Path) -> Iterator[RunningServer]:
    with server_factory(principals_file=write_principals(tmp_path)) as srv:
        yield srv


def test_acl_routes(secured: RunningServer) -> None:
    c = secured.client
    acl = {
        "resource_type": "TOPIC",
        "resource_name": "audit.",
        "pattern_type": "PREFIXED",
        "principal": "User:carol",
        "operation": "READ",
    }
    created = c.post("/v1/acls", json={"acls": [acl, {**acl, "operation": "WRITE"}]}, headers=ADMIN)
    assert created.status_code == 201, created.text
    assert created.json()["created"] == 2
    again = c.post("/v1/acls", json={"acls": [acl]}, headers=ADMIN)
    assert again.json()["created"] == 0
    listed = c.get("/v1/acls", params={"principal": "User:carol"}, headers=ADMIN).json()["acls"]
    assert {(a["operation"], a["host"], a["permission"]) for a in listed} == {
        ("READ", "*", "ALLOW"),
        ("WRITE", "*", "ALLOW"),
    }
    match = c.get("/v1/acls", params={"resource_name": "audit.x", "pattern_type": "MATCH"}, headers=ADMIN)
    assert len(match.json()["acls"]) == 2
    # carol's ACLs are in force at once on this agent.
    secured.runtime.metadata.create_topic("audit.x", 1, {}, 0)
    assert c.get("/v1/topics", headers=basic("carol")).json()["topics"] == ["audit.x"]
    # The host is the client's address: an ACL for another host does not apply to this client.
    secured.runtime.metadata.create_topic("hosted", 1, {}, 0)
    elsewhere = {**acl, "resource_name": "hosted", "pattern_type": "LITERAL", "host": "10.9.9.9"}
    assert c.post("/v1/acls", json={"acls": [elsewhere]}, headers=ADMIN).status_code == 201
    assert c.get("/v1/topics", headers=basic("carol")).json()["topics"] == ["audit.x"]
    here = {**elsewhere, "host": "127.0.0.1"}
    assert c.post("/v1/acls", json={"acls": [here]}, headers=ADMIN).status_code == 201
    assert c.get("/v1/topics", headers=basic("carol")).json()["topics"] == ["audit.x", "hosted"]
    bad = c.post("/v1/acls", json={"acls": [{**acl, "resource_type": "CLUSTER"}]}, headers=ADMIN)
    assert (bad.status_code, bad.json()["error_code"]) == (400, 40001)
    assert "kafka-cluster" in bad.json()["message"]
    assert c.delete("/v1/acls", headers=ADMIN).json()["error_code"] == 40001  # a bare DELETE
    deleted = c.delete(
        "/v1/acls",
        params={"principal": "User:carol", "operation": "WRITE", "resource_name": "audit."},
        headers=ADMIN,
    )
    assert [a["operation"] for a in deleted.json()["deleted"]] == ["WRITE"]
    for method, path in (("GET", "/v1/acls"), ("POST", "/v1/acls"), ("DELETE", "/v1/acls?principal=x")):
        refused = c.request(method, path, json={"acls": [acl]}, headers=basic("alice"))
        assert (refused.status_code, refused.json()["error_code"]) == (403, 40303), path


def test_user_routes_and_basic_auth_for_stored_users(secured: RunningServer) -> None:
    c = secured.client
    put = c.put(
        "/v1/users/frank/scram/SCRAM-SHA-256",
        json={"password": "frank-pw-83b1", "iterations": 8192},
        headers=ADMIN,
    )
    assert put.status_code == 200, put.text
    assert put.json() == {
        "name": "frank",
        "credentials": [{"mechanism": "SCRAM-SHA-256", "iterations": 8192}],
    }
    assert "frank-pw-83b1" not in put.text
    assert c.get("/v1/topics", headers=basic("frank", "frank-pw-83b1")).status_code == 200
    assert c.get("/v1/topics", headers=basic("frank", "nope")).status_code == 401
    # As Kafka's admin clients send it: salted by the client, the server never sees the password.
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha512", b"grace-pw-4e02", salt, 4096)
    body = {
        "salt": base64.b64encode(salt).decode(),
        "salted_password": base64.b64encode(salted).decode(),
        "iterations": 4096,
    }
    assert c.put("/v1/users/grace/scram/SCRAM-SHA-512", json=body, headers=ADMIN).status_code == 200
    assert c.get("/v1/topics", headers=basic("grace", "grace-pw-4e02")).status_code == 200
    users = c.get("/v1/users", headers=ADMIN).json()["users"]
    assert [u["name"] for u in users] == ["frank", "grace"]
    for wrong, code in (({"password": "x", "iterations": 100}, 42206), ({"iterations": 4096}, 42206)):
        assert (
            c.put("/v1/users/h/scram/SCRAM-SHA-256", json=wrong, headers=ADMIN).json()["error_code"] == code
        )
    assert (
        c.put("/v1/users/a,b/scram/SCRAM-SHA-256", json={"password": "p"}, headers=ADMIN).json()["error_code"]
        == 40008
    )
    assert c.delete("/v1/users/frank/scram/SCRAM-SHA-256", headers=ADMIN).status_code == 204
    assert c.get("/v1/topics", headers=basic("frank", "frank-pw-83b1")).status_code == 401
    missing = c.delete("/v1/users/frank/scram/SCRAM-SHA-256", headers=ADMIN)
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40406)
    refused = c.put("/v1/users/x/scram/SCRAM-SHA-256", json={"password": "p"}, headers=basic("bob"))
    assert refused.json()["error_code"] == 40303


def test_idempotency_keys_are_scoped_by_principal(secured: RunningServer) -> None:
    c = secured.client
    assert (
        c.post("/v1/topics", json={"name": "orders.idem", "partitions": 1}, headers=ADMIN).status_code == 201
    )
    key = {"Idempotency-Key": "same-key-1"}

    def produce(user: str, value: str) -> list[Any]:
        answer = c.post(
            "/v1/topics/orders.idem/records",
            json={"records": [{"value": value}]},
            headers={**basic(user), **key},
        )
        assert answer.status_code == 200, answer.text
        offsets: list[Any] = answer.json()["offsets"]
        return offsets

    alice = produce("alice", "from alice")
    admin = produce("admin", "from admin")
    assert alice != admin  # the second principal's request was not taken for a retry of the first's
    assert produce("alice", "from alice") == alice  # a retry by the same principal is
    fetched = c.get(
        "/v1/topics/orders.idem/partitions/0/records", params={"max_wait_ms": 0}, headers=ADMIN
    ).json()
    assert [r["value"] for r in fetched["records"]] == ["from alice", "from admin"]


def test_readyz_tells_why_only_to_who_may_describe_the_cluster(
    server_factory: Callable[..., Any], tmp_path: Path
) -> None:
    with server_factory(principals_file=write_principals(tmp_path)) as srv:
        assert srv.client.get("/readyz").json() == {"status": "ready"}
        srv.runtime.metadata.close()  # the store stops answering
        anonymous = srv.client.get("/readyz")
        assert anonymous.status_code == 503
        assert "metadata.db" not in anonymous.text
        assert str(tmp_path) not in anonymous.text
        assert srv.client.get("/readyz", headers=basic("bob")).status_code == 503
        assert "metadata.db" not in srv.client.get("/readyz", headers=basic("bob")).text
        operator = srv.client.get("/readyz", headers=ADMIN)
        assert operator.status_code == 503
        assert "metadata.db" in operator.text


def test_no_open_kafka_door_beside_an_authenticating_http_door(tmp_path: Path) -> None:
    tokens = Settings(data_dir=str(tmp_path), api_tokens="t0k3n", kafka_port=9092)
    with pytest.raises(SettingsError, match="--allow-open-kafka"):
        check_no_open_door(tokens)
    check_no_open_door(replace(tokens, allow_open_kafka=True))
    check_no_open_door(replace(tokens, kafka_port=-1))
    check_no_open_door(replace(tokens, principals_file=write_principals(tmp_path)))
    check_no_open_door(replace(tokens, role="worker"))
    strata = str(Path(sys.executable).parent / "strata")
    argv = [
        strata,
        "serve",
        "--data-dir",
        str(tmp_path / "d"),
        "--port",
        str(free_port()),
        "--kafka-port",
        str(free_port()),
        "--schema-registry-port",
        "-1",
    ]
    refused = subprocess.run(
        argv, env={**os.environ, "STRATA_API_TOKENS": "t0k3n"}, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0
    assert "--allow-open-kafka" in refused.stderr + refused.stdout
    assert "t0k3n" not in refused.stderr + refused.stdout
