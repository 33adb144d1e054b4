"""The schema registry's authentication and permissions: the agent's own principals (HTTP Basic, which
confluent-kafka sends for ``basic.auth.user.info``, and bearer tokens for ``bearer.auth.token``) and the one
permission table, with subjects as a resource.

- The table walked (as tests/integration/test_permission_table_http.py walks Strata's routes): every route
  of the registry's app has an entry in ``REGISTRY``; for each need, a principal holding every permission
  but that one is refused with 403 and 40301 (or, where the need filters, does not see the item), and
  with exactly that one is not; open routes answer any principal, probes anyone.
- confluent-kafka's client with a principal whose grants cover subjects by prefix: what it may and may not
  do, and 401 for no or wrong credentials.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from fastapi.routing import APIRoute

from agents.permissions import REGISTRY, Need
from api.registry.app import create_registry_app
from tests.fixtures.permissions import PROBE, PROBE_PASSWORD, PROBE_TOML, everything_but, only_just, set_acls
from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration

AUTH = {"Authorization": "Basic " + base64.b64encode(f"{PROBE}:{PROBE_PASSWORD}".encode()).decode()}


def avro(name: str, *fields: str) -> str:
    return json.dumps(
        {"type": "record", "name": name, "fields": [{"name": f, "type": "int"} for f in fields]}
    )


@pytest.fixture
def walked(server_factory: Callable[..., Any], tmp_path: Path) -> Iterator[RunningServer]:
    path = tmp_path / "probe.toml"
    path.write_text(PROBE_TOML)
    with server_factory(principals_file=str(path), kafka_port=-1) as srv:
        yield srv


def test_every_route_has_an_entry(walked: RunningServer) -> None:
    found: set[tuple[str, str]] = set()
    routes = list(create_registry_app(walked.runtime.registry_context()).routes)
    while routes:
        r = routes.pop()
        if isinstance(r, APIRoute):
            found |= {(m, r.path) for m in r.methods if m != "HEAD"}
        else:  # FastAPI's included router: the routes of the router it includes
            routes += r.original_router.routes  # type: ignore[attr-defined]
    assert found == set(REGISTRY), "a route without a permission entry, or an entry without a route"


@dataclass
class Call:
    method: str
    url: str
    body: Any = None
    # For a need that filters: whether the answer shows the subject.
    shows: Callable[[httpx.Response], bool] | None = None


class Subjects:
    """A fresh subject per call, with one version registered (by the agent itself, not through a door)."""

    def __init__(self, server: RunningServer) -> None:
        self.registry = server.runtime.schema_registry()
        self._n = itertools.count()

    def new(self) -> tuple[str, int, str]:
        name = f"walk-{next(self._n)}"
        found = self.registry.register(name, avro(f"R{name.replace('-', '')}", "a"))
        return name, found.schema_id, found.schema.guid


def call(method: str, path: str, need: Need, subjects: Subjects) -> Call:
    subject, schema_id, guid = subjects.new()
    url = path.format(subject=subject, version="1", schema_id=schema_id, guid=guid)
    listed: dict[tuple[str, str], Callable[[httpx.Response], bool]] = {
        ("GET", "/schemas"): lambda r: subject in [s["subject"] for s in r.json()],
        ("GET", "/subjects"): lambda r: subject in r.json(),
        ("GET", "/schemas/ids/{schema_id}/subjects"): lambda r: subject in r.json(),
        ("GET", "/schemas/ids/{schema_id}/versions"): lambda r: subject in [v["subject"] for v in r.json()],
    }
    if need.filters:
        return Call(method, url, shows=listed[(method, path)])
    same = {"schema": avro(f"R{subject.replace('-', '')}", "a")}
    bodies = {
        "/subjects/{subject}": same,
        "/subjects/{subject}/versions": {"schema": avro(f"R{subject.replace('-', '')}", "a", "b")},
        "/compatibility/subjects/{subject}/versions/{version}": same,
        "/compatibility/subjects/{subject}/versions": same,
        "/config": {"compatibility": "BACKWARD"},
        "/config/{subject}": {"compatibility": "NONE"},
        "/mode": {"mode": "READWRITE"},
        "/mode/{subject}": {"mode": "READWRITE"},
    }
    return Call(method, url, bodies.get(path) if method in ("POST", "PUT") else None)


def _denied(server: RunningServer, c: Call) -> bool:
    answer = httpx.request(c.method, server.registry_url + c.url, json=c.body, headers=AUTH)
    if c.shows is not None:
        assert answer.status_code == 200, (c.url, answer.text)
        return not c.shows(answer)
    if answer.status_code == 403:
        assert answer.json()["error_code"] == 40301, (c.url, answer.text)
        assert PROBE in answer.json()["message"]
        return True
    assert answer.status_code < 500, (c.method, c.url, answer.text)
    return False


def test_each_need_is_enforced(walked: RunningServer) -> None:
    subjects = Subjects(walked)
    checked = 0
    for (method, path), rule in sorted(REGISTRY.items()):
        for need in rule.needs:
            set_acls(walked.runtime, everything_but(need))
            assert _denied(walked, call(method, path, need, subjects)), (method, path, need.describe())
            set_acls(walked.runtime, only_just(need))
            assert not _denied(walked, call(method, path, need, subjects)), (method, path, "refused with all")
            checked += 1
    assert checked == sum(len(r.needs) for r in REGISTRY.values())


def test_open_routes(walked: RunningServer) -> None:
    set_acls(walked.runtime, [])
    for (method, path), rule in sorted(REGISTRY.items()):
        if rule.needs:
            continue
        assert rule.open, path
        url = walked.registry_url + path
        assert httpx.request(method, url, headers=AUTH).status_code == 200, path
        without = httpx.request(method, url)
        if rule.unauthenticated:
            assert without.status_code == 200, path
        else:
            assert (without.status_code, without.json()["error_code"]) == (401, 401), path


TOML = """
[principals.admin]
password = "admin-pw-4d1e"
superuser = true

# The orders team: its own subjects, read and written; a token for its services.
[principals.orders]
password = "orders-pw-7a2c"
tokens = ["orders-token-5b9f"]
subjects = { read = ["orders."], write = ["orders."] }

# Reads every subject, changes none.
[principals.auditor]
password = "auditor-pw-0c3d"
subjects = { read = ["*"] }
"""


def test_a_prefix_grant_with_basic_and_bearer(server_factory: Callable[..., Any], tmp_path: Path) -> None:
    (tmp_path / "principals.toml").write_text(TOML)
    with (
        server_factory(principals_file=str(tmp_path / "principals.toml"), kafka_port=-1) as srv,
        contextlib.ExitStack() as clients,
    ):
        url = srv.registry_url

        def client(**conf: str) -> SchemaRegistryClient:
            return clients.enter_context(SchemaRegistryClient({"url": url, "max.retries": 0, **conf}))

        admin = client(**{"basic.auth.user.info": "admin:admin-pw-4d1e"})
        orders = client(**{"basic.auth.user.info": "orders:orders-pw-7a2c"})
        bearer = client(
            url=srv.registry_prefix_url,
            **{
                "bearer.auth.credentials.source": "STATIC_TOKEN",
                "bearer.auth.token": "orders-token-5b9f",
                "bearer.auth.logical.cluster": "-",
            },
        )
        auditor = client(**{"basic.auth.user.info": "auditor:auditor-pw-0c3d"})
        schema = Schema(avro("Order", "id"), "AVRO")
        own = orders.register_schema("orders.created-value", schema)
        assert bearer.register_schema("orders.paid-value", schema) == own  # one schema, one id
        foreign = admin.register_schema("payments-value", Schema(avro("Payment", "id"), "AVRO"))
        assert orders.get_subjects() == ["orders.created-value", "orders.paid-value"]
        assert bearer.get_schema(own).schema_str == schema.schema_str
        assert auditor.get_subjects() == ["orders.created-value", "orders.paid-value", "payments-value"]

        def refused(call: Callable[[], object]) -> tuple[int, int]:
            with pytest.raises(SchemaRegistryError) as info:
                call()
            return info.value.http_status_code, info.value.error_code

        assert refused(lambda: orders.register_schema("payments-value", schema)) == (403, 40301)
        assert refused(lambda: bearer.get_schema(foreign)) == (403, 40301)
        assert refused(lambda: orders.get_latest_version("payments-value")) == (403, 40301)
        assert refused(lambda: orders.delete_subject("orders.created-value")) == (403, 40301)  # not admin
        assert refused(lambda: orders.set_compatibility("orders.created-value", "NONE")) == (403, 40301)
        assert refused(lambda: orders.get_compatibility()) == (403, 40301)  # the global config
        # A reader may read its subject's config (none is set: 40408, not 403).
        assert refused(lambda: orders.get_compatibility("orders.created-value")) == (404, 40408)
        assert refused(lambda: auditor.register_schema("orders.x-value", schema)) == (403, 40301)
        assert auditor.get_schema(foreign).schema_type == "AVRO"
        for anonymous in (client(), client(**{"basic.auth.user.info": "orders:wrong"})):
            assert refused(anonymous.get_subjects) == (401, 401)
        # SUBJECT ACLs through Strata's ACL API, in force at once on this agent.
        grant = {"resource_type": "SUBJECT", "resource_name": "audit.", "pattern_type": "PREFIXED"}
        grant |= {"principal": "User:auditor", "operation": "WRITE"}
        as_admin = {"Authorization": "Basic " + base64.b64encode(b"admin:admin-pw-4d1e").decode()}
        assert srv.client.post("/v1/acls", json={"acls": [grant]}, headers=as_admin).status_code == 201
        listed = srv.client.get("/v1/acls", params={"resource_type": "SUBJECT"}, headers=as_admin).json()
        assert {(a["resource_name"], a["operation"]) for a in listed["acls"]} >= {("audit.", "WRITE")}
        assert auditor.register_schema("audit.log-value", schema) == own
