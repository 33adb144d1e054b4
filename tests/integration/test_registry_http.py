"""The schema registry over plain HTTP, where a client library would hide the details: content negotiation
(the cases of Karapace's test_http_headers), the shape of every error the door and the routes answer, the
paths a subject with a ``/`` takes, the probes and metadata endpoints, the prefix on the HTTP port beside
Strata's own routes and authentication, and never a 500 for anything a client sends.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agents.permissions import REGISTRY
from tests.fixtures.server import RunningServer
from tests.kafka.test_tls import cert  # noqa: F401 (a fixture: a self-signed certificate and key)

pytestmark = pytest.mark.integration

V1 = "application/vnd.schemaregistry.v1+json"
STRING = json.dumps({"type": "string"})


@pytest.fixture
def srv(server_factory: Callable[..., Any]) -> Iterator[RunningServer]:
    with server_factory(max_request_bytes=1 << 20) as running:
        yield running


@pytest.fixture(params=["own-port", "http-prefix"])
def http(srv: RunningServer, request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    url = srv.registry_url if request.param == "own-port" else srv.registry_prefix_url
    with httpx.Client(base_url=url, timeout=30) as client:
        yield client


def test_content_negotiation(http: httpx.Client) -> None:
    """Karapace's test_http_headers: the answer's type from Accept, 406 and 415 in the registry's shape."""
    assert http.get("/subjects", headers={"Accept": "application/json"}).headers["Content-Type"] == (
        "application/json"
    )
    assert http.get("/subjects").headers["Content-Type"] == V1
    for accept in ("application/vnd.schemaregistry.v2+json", "text/*", "application/octet-stream"):
        refused = http.get("/subjects", headers={"Accept": accept})
        assert (refused.status_code, refused.json()["message"]) == (406, "HTTP 406 Not Acceptable"), accept
    html = http.put("/config", json={"compatibility": "NONE"}, headers={"Content-Type": "text/html"})
    assert (html.status_code, html.json()["message"]) == (415, "HTTP 415 Unsupported Media Type")
    assert html.headers["Content-Type"] == V1
    for accept, expected in (
        ("text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2", V1),
        ("application/vnd.schemaregistry.v2+json; q=0.1, application/vnd.schemaregistry+json; q=0.9",
         "application/vnd.schemaregistry+json"),
        ("application/*", V1),
        ("*/does_not_matter", V1),
        ("*", V1),
        ("*/*", V1),
    ):  # fmt: skip
        answer = http.get("/subjects", headers={"Accept": accept})
        assert (answer.status_code, answer.headers["Content-Type"]) == (200, expected), accept
    for content_type in ("application/octet-stream", f"{V1}; charset=utf-8"):
        answer = http.put("/config", json={"compatibility": "FULL"}, headers={"Content-Type": content_type})
        assert (answer.status_code, answer.headers["Content-Type"]) == (200, V1), content_type
    utf16 = http.put(
        "/config",
        content='{"compatibility": "NONE"}'.encode("utf-16"),
        headers={"Content-Type": f"{V1}; charset=utf-16"},
    )
    assert (utf16.status_code, utf16.json()) == (200, {"compatibility": "NONE"})
    # An error answer carries the negotiated type too.
    missing = http.get("/subjects/nope/versions", headers={"Accept": "application/json"})
    assert (missing.status_code, missing.headers["Content-Type"]) == (404, "application/json")


def test_error_shapes(http: httpx.Client) -> None:
    assert http.get("/nowhere").json() == {"error_code": 404, "message": "HTTP 404 Not Found"}
    assert http.delete("/subjects").json() == {"error_code": 405, "message": "HTTP 405 Method Not Allowed"}
    assert http.get("/schemas/ids/invalid").json() == {"error_code": 404, "message": "HTTP 404 Not Found"}
    for huge in ("0", "-3", "9" * 40):
        assert http.get(f"/schemas/ids/{huge}").json()["error_code"] == 40403, huge
    for method in ("/subjects/v/versions", "/subjects/v"):
        missing = http.post(method, json={"invalid_field": "invalid_value"})
        assert (missing.status_code, missing.json()) == (
            422,
            {
                "error_code": 422,
                "message": [
                    {
                        "type": "missing",
                        "loc": ["body", "schema"],
                        "msg": "Field required",
                        "input": {"invalid_field": "invalid_value"},
                    }
                ],
            },
        )
        not_an_object = http.post(method, json="invalid")
        assert not_an_object.json()["message"][0]["type"] == "model_attributes_type"
        assert http.post(method, json={"schema": STRING, "extra": 1}).status_code in (200, 404)
    assert http.post("/subjects/v/versions", json={"schema": ""}).json() == {
        "error_code": 42201,
        "message": "Empty schema",
    }
    wrong_type = http.post("/subjects/v/versions", json={"schema": STRING, "schemaType": "AVROO"})
    assert (wrong_type.status_code, wrong_type.json()["error_code"]) == (422, 422)
    assert http.get("/subjects/v/versions/0").json()["error_code"] == 42202
    assert http.get("/subjects/v/versions/invalid").json()["error_code"] == 42202


def test_bodies_a_client_may_send(http: httpx.Client) -> None:
    """Bodies that are not JSON, not UTF-8, in an unknown charset, or too large: a 4xx, never a 500."""
    answers = {
        "not json": http.post("/subjects/b/versions", content=b"{bad", headers={"Content-Type": V1}),
        "not utf-8": http.post("/subjects/b/versions", content=b'{"schema": "\xff\xfe"}'),
        "not utf-16": http.put(
            "/config", content=b"\x00\xd8{", headers={"Content-Type": f"{V1}; charset=utf-16-le"}
        ),
        "unknown charset": http.put(
            "/config", content=b"{}", headers={"Content-Type": f"{V1}; charset=x-nope"}
        ),
        "too large": http.post(
            "/subjects/b/versions", content=b" " * (2 << 20), headers={"Content-Type": V1}
        ),
    }
    got = {name: (a.status_code, a.json()["error_code"]) for name, a in answers.items()}
    assert got == {
        "not json": (422, 422),
        "not utf-8": (400, 400),
        "not utf-16": (400, 400),
        "unknown charset": (415, 415),
        "too large": (413, 413),
    }


def test_subjects_with_slashes_and_trailing_slashes(http: httpx.Client) -> None:
    for subject, path in (("a/b", "a%2Fb"), ("100%", "100%25"), ("sp ace+plus", "sp%20ace%2Bplus")):
        assert http.post(f"/subjects/{path}/versions", json={"schema": STRING}).status_code == 200, subject
        assert http.get(f"/subjects/{path}/versions/").json() == [1], subject
        assert http.get(f"/subjects/{path}/versions/latest").json()["subject"] == subject
    assert sorted(http.get("/subjects/").json()) == ["100%", "a/b", "sp ace+plus"]


def test_probes_and_metadata(http: httpx.Client, srv: RunningServer) -> None:
    assert http.get("/").json() == {}
    assert http.get("/_health").json() == {"healthy": True}
    available = http.get("/master_available")
    assert (available.json(), available.headers["Cache-Control"]) == ({"master_available": True}, "no-store")
    assert http.get("/contexts").json() == ["."]
    assert http.get("/v1/metadata/id").json() == {
        "scope": {
            "path": [],
            "clusters": {"kafka-cluster": "strata", "schema-registry-cluster": "schema-registry"},
        }
    }
    assert set(http.get("/v1/metadata/version").json()) == {"version", "commitId"}
    # A probe answers whatever the Accept header asks.
    assert http.get("/", headers={"Accept": "text/html"}).status_code == 200
    # The HTTP port's own routes are Strata's, beside the prefix.
    assert srv.client.get("/healthz").status_code == 200
    # Only the prefix itself and what is under it are the registry's: Strata's 404 (40400) here.
    assert srv.client.get("/schema-registryx").json()["error_code"] == 40400


def test_the_prefix_answers_in_the_registrys_shape_when_strata_authenticates(
    server_factory: Callable[..., Any],
) -> None:
    """With STRATA_API_TOKENS, Strata's routes answer Strata's 401 (40101); the registry under the prefix
    answers its own (401), and its probes stay open."""
    with server_factory(api_tokens="t0k3n", kafka_port=-1) as srv:
        strata = srv.client.get("/v1/topics")
        assert (strata.status_code, strata.json()["error_code"]) == (401, 40101)
        for base in (srv.registry_prefix_url, srv.registry_url):
            registry = httpx.get(f"{base}/subjects")
            assert (registry.status_code, registry.json()["error_code"]) == (401, 401)
            assert "Basic" in registry.headers["WWW-Authenticate"]
            assert httpx.get(f"{base}/master_available").status_code == 200
            allowed = httpx.get(f"{base}/subjects", headers={"Authorization": "Bearer t0k3n"})
            assert (allowed.status_code, allowed.json()) == (200, [])


GARBAGE_BODIES = (
    b"",
    b"null",
    b"[]",
    b'{"schema": 5}',
    b'{"schema": "{", "schemaType": "PROTOBUF"}',
    b'{"schema": "syntax = \\"proto3\\"; import \\"x.proto\\";", "schemaType": "PROTOBUF"}',
    b'{"schema": "{\\"$ref\\": \\"#/nope\\"}", "schemaType": "JSON"}',
    b'{"schema": "\\"int\\"", "references": [{"name": 1}]}',
    b'{"schema": "\\"int\\"", "references": [{"name": "n", "subject": "s", "version": 99}]}',
    b'{"schema": "\\"int\\"", "id": -1}',
    b'{"compatibility": ["x"], "mode": {}}',
    b"\xff\xfe\x00",
)
GARBAGE_PARAMS = ("x", "-1", "0", "latest", "99999999999999999999999", "%FF", "%00", "..", "a%2F..%2Fb")


def test_no_route_answers_a_500_to_garbage(http: httpx.Client) -> None:
    http.post("/subjects/x/versions", json={"schema": STRING})
    sent = 0
    for method, template in sorted(REGISTRY):
        for param in GARBAGE_PARAMS:
            path = template.format(subject=param, version=param, schema_id=param, guid=param)
            bodies = GARBAGE_BODIES if method in ("POST", "PUT") else (b"",)
            for body in bodies:
                answer = http.request(
                    method, path, content=body, params={"deleted": param, "limit": param, "verbose": param}
                )
                sent += 1
                assert answer.status_code < 500, (method, path, body, answer.text)
                if answer.status_code >= 400:
                    assert "message" in answer.json(), (method, path, answer.text)
    assert sent > 500


def test_reads_by_id_and_guid_paging_and_extras(http: httpx.Client) -> None:
    proto = 'syntax = "proto3";\npackage t;\nmessage M {\n  string s = 1;\n}\n'
    first = http.post("/subjects/p1/versions", json={"schema": proto, "schemaType": "PROTOBUF"}).json()
    http.post("/subjects/p2/versions", json={"schema": proto, "schemaType": "PROTOBUF"})
    schema_id, guid = first["id"], first["guid"]
    by_id = http.get(f"/schemas/ids/{schema_id}", params={"fetchMaxId": "true", "includeSubjects": "true"})
    assert by_id.json() == {
        "schema": proto,
        "schemaType": "PROTOBUF",
        "maxId": schema_id,
        "subjects": ["p1", "p2"],
    }
    assert (
        "guid"
        in http.get(
            f"/schemas/ids/{schema_id}", headers={"Confluent-Accept-Unknown-Properties": "true"}
        ).json()
    )
    assert http.get(f"/schemas/ids/{schema_id}/schema").text == proto
    assert http.get("/subjects/p1/versions/1/schema").text == proto
    serialized = http.get("/subjects/p1/versions/latest", params={"format": "serialized"}).json()["schema"]
    assert (
        serialized == http.get(f"/schemas/ids/{schema_id}", params={"format": "serialized"}).json()["schema"]
    )
    assert serialized != proto
    assert http.get(f"/schemas/guids/{guid}").json()["id"] == schema_id
    assert http.get(f"/schemas/guids/{guid}/ids").json() == [{"context": ".", "id": schema_id}]
    assert http.get("/schemas/guids/no-such-guid").json()["error_code"] == 40403
    assert http.get(f"/schemas/ids/{schema_id}/subjects", params={"offset": 1, "limit": 1}).json() == ["p2"]
    assert http.get(f"/schemas/ids/{schema_id}/versions", params={"subject": "p2"}).json() == [
        {"subject": "p2", "version": 1}
    ]
    assert http.get("/subjects", params={"offset": 1}).json() == ["p2"]
    assert [s["subject"] for s in http.get("/schemas", params={"limit": 1}).json()] == ["p1"]
    # Soft-deleted: gone from the lists unless asked for, still found by a lookup that asks.
    http.delete("/subjects/p2")
    assert http.get("/subjects", params={"deletedOnly": "true"}).json() == ["p2"]
    assert http.get(f"/schemas/ids/{schema_id}/subjects").json() == ["p1"]
    lookup = {"schema": proto, "schemaType": "PROTOBUF"}
    assert http.post("/subjects/p2", json=lookup).json()["error_code"] == 40401
    assert http.post("/subjects/p2", params={"deleted": "true"}, json=lookup).json()["version"] == 1


def test_the_own_port_speaks_the_http_listeners_tls(
    server_factory: Callable[..., Any],
    cert: tuple[str, str],  # noqa: F811 (the fixture imported above)
) -> None:
    crt, key = cert
    with server_factory(tls_cert_file=crt, tls_key_file=key) as srv:
        listener = srv.runtime.registry_listener
        assert listener is not None
        trust = ssl.create_default_context(cafile=crt)
        answer = httpx.get(f"https://127.0.0.1:{listener.port}/subjects", verify=trust)
        assert (answer.status_code, answer.json()) == (200, [])
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{listener.port}/subjects", timeout=2)
