"""The permission table (agents/permissions.py), walked over the HTTP door: every route of the app has an
entry and a request here; for each need, a principal holding every permission but that one is refused with
403 and the resource's code (40301 topic, 40302 group, 40303 cluster) or, where the need filters, does not
see the item; with every permission the same request is not refused. Open routes answer a principal
without any ACL, and the probes answer without credentials.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute
from starlette.routing import Mount, Route

from agents.permissions import CONFIGS, HTTP, Need
from api.app import create_app
from storage.acl_model import ResourceType
from tests.fixtures.permissions import PROBE, PROBE_PASSWORD, PROBE_TOML, everything_but, only_just, set_acls
from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration

CODES = {
    ResourceType.TOPIC: 40301,
    ResourceType.GROUP: 40302,
    ResourceType.CLUSTER: 40303,
    ResourceType.TRANSACTIONAL_ID: 40304,
}
AUTH = {"Authorization": "Basic " + base64.b64encode(f"{PROBE}:{PROBE_PASSWORD}".encode()).decode()}


@dataclass
class Call:
    method: str
    url: str
    body: Any = None
    # For a need that filters: whether the answer shows the item.
    shows: Callable[[httpx.Response], bool] | None = None


def app_routes(server: RunningServer) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    routes = list(create_app(server.runtime.http_context()).routes)
    while routes:
        r = routes.pop()
        if isinstance(r, APIRoute | Route):
            found |= {(m, r.path) for m in r.methods or () if m != "HEAD"}
        elif isinstance(r, Mount):
            found.add(("GET", r.path))
        else:  # FastAPI's included router: the routes of the router it includes
            routes += r.original_router.routes
    return found


class Names:
    def __init__(self, server: RunningServer) -> None:
        self.meta = server.runtime.metadata
        self._n = itertools.count()

    def topic(self) -> str:
        name = f"walk-{next(self._n)}"
        self.meta.create_topic(name, 1, {}, 0)
        return name

    def group(self, topic: str) -> str:
        name = f"walk-g-{next(self._n)}"
        self.meta.commit_group_offsets(name, [(topic, 0, 1)], 0)
        return name

    def transaction(self, topic: str) -> str:
        """An open transaction writing to ``topic`` (partition 0)."""
        name = f"walk-tx-{next(self._n)}"
        given, _ = self.meta.init_transactional_producer(name, 60_000, 900_000, None, 0)
        assert self.meta.add_partitions_to_txn(name, given.producer_id, given.epoch, [(topic, 0)], 0) == {}
        return name


def call(method: str, path: str, need: Need, names: Names) -> Call:
    t = names.topic()
    g = names.group(t)
    url = path.replace("{topic}", t).replace("{partition}", "0").replace("{group}", g)
    url = url.replace("{user}", "walker").replace("{mechanism}", "SCRAM-SHA-256")
    txn = names.transaction(t)
    url = url.replace("{transactional_id}", txn)
    listed: dict[tuple[str, str], Callable[[httpx.Response], bool]] = {
        ("GET", "/v1/topics"): lambda r: t in r.json()["topics"],
        ("GET", "/v1/groups"): lambda r: g in [x["group"] for x in r.json()["groups"]],
        ("GET", "/v1/groups/{group}"): lambda r: t in [p["topic"] for p in r.json()["partitions"]],
        ("GET", "/v1/groups/{group}/offsets"): lambda r: t in [o["topic"] for o in r.json()["offsets"]],
        ("GET", "/v1/topics/{topic}"): lambda r: bool(r.json()["configs"]),
        ("GET", "/v1/transactions"): lambda r: (
            any(p["topic"] == t for x in r.json()["transactions"] for p in x["partitions"])
            if need.resource is ResourceType.TOPIC
            else txn in [x["transactional_id"] for x in r.json()["transactions"]]
        ),
    }
    if (method, path) == ("GET", "/v1/lake"):
        # Only lake-enabled topics are listed: the walk's topic becomes one (no writer runs here).
        names.meta.update_topic_configs(t, {"strata.iceberg.mode": "raw"})
        return Call(method, url, shows=lambda r: t in [x["topic"] for x in r.json()["tables"]])
    if need.filters and (method, path) == ("GET", "/v1/compaction/jobs"):
        return Call(method, url + f"?topic={t}")  # naming one topic is refused, as for the others
    if need.filters:
        return Call(method, url, shows=listed[(method, path)])
    bodies: dict[tuple[str, str], Any] = {
        ("POST", "/v1/topics"): {"name": f"{t}-new", "partitions": 1},
        ("PATCH", "/v1/topics/{topic}/configs"): {"configs": {"retention.ms": "1000"}},
        ("POST", "/v1/topics/{topic}/partitions"): {"partitions": 2},
        ("POST", "/v1/topics/{topic}/records"): {"records": [{"value": "v"}]},
        ("PUT", "/v1/groups/{group}/offsets"): {"offsets": [{"topic": t, "partition": 0, "offset": 0}]},
        ("POST", "/v1/groups/{group}/offsets/reset"): {"topic": t, "to": "earliest", "dry_run": True},
        ("POST", "/v1/acls"): {
            "acls": [
                {"resource_type": "TOPIC", "resource_name": "z", "principal": "User:n", "operation": "READ"}
            ]
        },
        ("PUT", "/v1/users/{user}/scram/{mechanism}"): {"password": "walker-pw"},
    }
    queries = {
        ("GET", "/v1/topics/{topic}/partitions/{partition}/records"): "?max_wait_ms=0",
        ("DELETE", "/v1/topics/{topic}/partitions/{partition}/records"): "?before_offset=0",
        ("DELETE", "/v1/acls"): "?principal=User:nobody",
    }
    return Call(method, url + queries.get((method, path), ""), bodies.get((method, path)))


def _denied(server: RunningServer, c: Call, need: Need) -> bool:
    answer = server.client.request(c.method, c.url, json=c.body, headers=AUTH)
    if c.shows is not None:
        assert answer.status_code == 200, (c.url, answer.text)
        return not c.shows(answer)
    if answer.status_code == 403:
        assert answer.json()["error_code"] == CODES[need.resource], (c.url, answer.text)
        assert PROBE in answer.json()["message"]
        return True
    assert answer.status_code < 500, (c.url, answer.text)
    return False


@pytest.fixture
def walked(server_factory: Callable[..., Any], tmp_path: Path) -> Iterator[RunningServer]:
    path = tmp_path / "probe.toml"
    path.write_text(PROBE_TOML)
    with server_factory(principals_file=str(path)) as srv:
        yield srv


def test_every_route_has_an_entry(walked: RunningServer) -> None:
    assert app_routes(walked) == set(HTTP), "a route without a permission entry, or an entry without a route"


def test_each_need_is_enforced(walked: RunningServer) -> None:
    names = Names(walked)
    checked = 0
    for (method, path), rule in sorted(HTTP.items()):
        for need in rule.needs:
            if rule.unauthenticated:
                continue  # /readyz's detail: test_security_api.py, with a store that does not answer
            set_acls(walked.runtime, everything_but(need))
            assert _denied(walked, call(method, path, need, names), need), (method, path, need.describe())
            set_acls(walked.runtime, only_just(need))
            assert not _denied(walked, call(method, path, need, names), need), (
                method,
                path,
                "refused with all",
            )
            checked += 1
    assert checked == sum(len(r.needs) for r in HTTP.values() if not r.unauthenticated)
    assert HTTP[("GET", "/v1/topics/{topic}")].need(ResourceType.TOPIC, CONFIGS).filters


def test_open_routes(walked: RunningServer) -> None:
    set_acls(walked.runtime, [])
    for (method, path), rule in sorted(HTTP.items()):
        if rule.needs and not rule.unauthenticated:
            continue
        assert rule.open, path
        url = path if path != "/ui/assets" else "/ui/assets/console.css"
        assert walked.client.request(method, url, headers=AUTH).status_code in (200, 307), path
        if rule.unauthenticated:
            assert walked.client.request(method, url).status_code == 200, path
        else:
            assert walked.client.request(method, url).status_code == 401, path
