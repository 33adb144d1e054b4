"""Bad input over HTTP, table-driven: every case gets its exact status and error code, and changes nothing.

One module-scoped server (embedded backend) with small limits (5 records and 1000 bytes per request) serves
the cases; a second one with the default limits takes the few bodies that must be big to be bad. Before any
case each holds known topics, records and a group's offsets. Around each case the state is read (topic list,
every topic's partitions, high watermarks, configs and records, the group's offsets, and the object store's
PUT count) and must be the same after as before. It is read before each case, not once, so that a case that
does change something fails alone instead of failing every case after it.

Topic and group names in paths are percent-encoded where a client would otherwise rewrite them ("." and ".."
are dot-segments that httpx resolves away), so the server sees exactly the bad name.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from storage.objectstore.base import PUT
from tests.fixtures.server import RunningServer, local_settings, run_server

pytestmark = pytest.mark.integration

MAX_RECORDS = 5
MAX_REQUEST_BYTES = 1000
TOPIC = "known"  # 2 partitions, default configs
SMALL = "small"  # max.message.bytes=100
COMPACTED = "compacted"  # cleanup.policy=compact
BINARY = "binary"  # one record whose value is not UTF-8
GROUP = "readers"
FETCH = f"/v1/topics/{TOPIC}/partitions/0/records"


@dataclass(frozen=True)
class Bad:
    """One bad request and the error it must get."""

    id: str
    method: str
    path: str  # already percent-encoded; may carry a query string
    status: int
    code: int
    body: bytes | None = None
    content_type: str | None = "application/json"
    headers: dict[str, str | bytes] = field(default_factory=dict)
    chunked: bool = False  # send the body with Transfer-Encoding: chunked (no Content-Length)
    roomy: bool = False  # send to the server with the default body limit (the body is over 1000 bytes)


def js(value: object) -> bytes:
    """JSON with non-ASCII escaped, so lone surrogates ("\\ud800") reach the server as JSON escapes."""
    return json.dumps(value).encode()


def enc(name: str) -> str:
    """A path segment the server decodes back to ``name``: all but [a-zA-Z0-9_~-] is percent-encoded."""
    return quote(name, safe="").replace(".", "%2E")


def produce(body: object, topic: str = TOPIC, **kw: Any) -> dict[str, Any]:
    return {"method": "POST", "path": f"/v1/topics/{topic}/records", "body": js(body), **kw}


def records(*recs: object, **top: object) -> dict[str, object]:
    return {"records": list(recs), **top}


def cases() -> Iterator[Bad]:
    # --- invalid topic names, in every path that takes one, and in bodies -----------------------------------
    bad_names = {
        "dot": ".",
        "dotdot": "..",
        "250-chars": "a" * 250,
        "space": "spaces here",
        "unicode": "ünïcode",
        "nul": "\x00",
        "percent-00": "%00",
        "colon": "a:b",
    }
    topic_routes = {
        "describe": ("GET", "/v1/topics/{}"),
        "delete": ("DELETE", "/v1/topics/{}"),
        "compact": ("POST", "/v1/topics/{}/compact"),
        "patch": ("PATCH", "/v1/topics/{}/configs"),
        "produce": ("POST", "/v1/topics/{}/records"),
        "fetch": ("GET", "/v1/topics/{}/partitions/0/records?max_wait_ms=0"),
        "offsets": ("GET", "/v1/topics/{}/partitions/0/offsets"),
    }
    route_bodies = {"patch": js({"configs": {}}), "produce": js(records({"value": "x"}))}
    for route, (method, template) in topic_routes.items():
        body = route_bodies.get(route)
        for label, name in bad_names.items():
            yield Bad(f"path-name-{label}-{route}", method, template.format(enc(name)), 400, 40003, body)
        # "" and a name with "/" are not one path segment: no route matches.
        yield Bad(f"path-name-slash-{route}", method, template.format("bad/name"), 404, 40400, body)
        yield Bad(f"path-name-encoded-slash-{route}", method, template.format("bad%2Fname"), 404, 40400, body)
        if route != "describe" and route != "delete":  # there, "" is the list route with a trailing slash
            yield Bad(f"path-name-empty-{route}", method, template.format(""), 404, 40400, body)
    body_names = {**bad_names, "empty": "", "slash": "bad/name", "lone-surrogate": "\ud800"}
    for label, name in body_names.items():
        yield Bad(f"body-name-{label}-create", "POST", "/v1/topics", 400, 40003, js({"name": name}))
        yield Bad(
            f"body-name-{label}-group-commit",
            "PUT",
            f"/v1/groups/{GROUP}/offsets",
            400,
            40003,
            js({"offsets": [{"topic": name, "partition": 0, "offset": 1}]}),
        )

    # --- bodies that are not JSON at all --------------------------------------------------------------------
    body_routes = {
        "create": ("POST", "/v1/topics"),
        "produce": ("POST", f"/v1/topics/{TOPIC}/records"),
        "patch": ("PATCH", f"/v1/topics/{TOPIC}/configs"),
        "group-commit": ("PUT", f"/v1/groups/{GROUP}/offsets"),
    }
    malformed = {
        "truncated": b'{"name": "x"',
        "garbage": b"not json",
        "trailing-data": b'{"name": "x"} {}',
        "single-quotes": b"{'name': 'x'}",
        "not-utf8": b'{"name": "\xff\xfe"}',
        "nul-byte": b"\x00",
    }
    # Parseable in principle, but past the JSON parser's own limits (nesting depth, int() digits).
    beyond_parser = {
        "nested-too-deep": b"[" * 100_000,
        "huge-integer": b'{"partitions": ' + b"9" * 5000 + b"}",
    }
    for route, (method, path) in body_routes.items():
        for label, raw in malformed.items():
            yield Bad(f"malformed-{label}-{route}", method, path, 400, 40001, raw)
        for label, raw in beyond_parser.items():
            yield Bad(f"malformed-{label}-{route}", method, path, 400, 40001, raw, roomy=True)
        # JSON of the wrong type at the top level.
        for label, value in {"list": [], "string": "x", "number": 1, "null": None, "bool": True}.items():
            yield Bad(f"top-level-{label}-{route}", method, path, 422, 42206, js(value))
        yield Bad(f"empty-body-{route}", method, path, 422, 42206, b"")
        yield Bad(f"empty-object-{route}", method, path, 422, 42206, b"{}")

    # --- create topic: fields, types, configs ---------------------------------------------------------------
    def create(label: str, status: int, code: int, **body: Any) -> Bad:
        return Bad(f"create-{label}", "POST", "/v1/topics", status, code, js({"name": "fresh", **body}))

    yield Bad("create-missing-name", "POST", "/v1/topics", 422, 42206, js({"partitions": 1}))
    # Adding partitions: the count only grows (TOPIC has 2), within the limit, as an integer.
    grow = f"/v1/topics/{TOPIC}/partitions"
    yield Bad("grow-same-count", "POST", grow, 422, 42209, js({"partitions": 2}))
    yield Bad("grow-shrink", "POST", grow, 422, 42209, js({"partitions": 1}))
    yield Bad("grow-zero", "POST", grow, 422, 42206, js({"partitions": 0}))
    yield Bad("grow-too-many", "POST", grow, 422, 42206, js({"partitions": 10_001}))
    yield Bad("grow-string", "POST", grow, 422, 42206, js({"partitions": "3"}))
    yield Bad("grow-extra-field", "POST", grow, 422, 42206, js({"partitions": 3, "x": 1}))
    yield Bad(
        "grow-unknown-topic", "POST", "/v1/topics/unknown/partitions", 404, 40401, js({"partitions": 3})
    )
    yield Bad("grow-bad-name", "POST", "/v1/topics/b%20d/partitions", 400, 40003, js({"partitions": 3}))
    yield create("extra-field", 422, 42206, extra=1)
    yield create("name-int", 422, 42206, name=5)
    yield create("name-null", 422, 42206, name=None)
    yield create("partitions-string", 422, 42206, partitions="3")
    yield create("partitions-float", 422, 42206, partitions=3.0)
    yield create("partitions-bool", 422, 42206, partitions=True)
    yield create("partitions-zero", 422, 42206, partitions=0)
    yield create("partitions-negative", 422, 42206, partitions=-1)
    yield create("partitions-over-max", 422, 42206, partitions=10_001)
    yield create("partitions-2pow40", 422, 42206, partitions=2**40)
    yield create("configs-list", 422, 42206, configs=[])
    yield create("exists", 400, 40002, name=TOPIC)
    bad_configs: dict[str, tuple[int, int, dict[str, Any]]] = {
        "unknown-name": (422, 42207, {"nope": "1"}),
        "retention-abc": (422, 42207, {"retention.ms": "abc"}),
        "retention-below-min": (422, 42207, {"retention.ms": -2}),
        "retention-float": (422, 42207, {"retention.ms": 1.5}),
        "retention-exponent": (422, 42207, {"retention.ms": "1e3"}),
        "retention-underscore": (422, 42207, {"retention.ms": "1_000"}),
        "retention-spaces": (422, 42207, {"retention.ms": " 5 "}),
        "retention-fullwidth-digits": (422, 42207, {"retention.ms": "\uff11\uff12"}),
        "retention-2pow63": (422, 42207, {"retention.ms": 2**63}),
        "retention-10pow30": (422, 42207, {"retention.ms": str(10**30)}),
        "ratio-2": (422, 42207, {"min.cleanable.dirty.ratio": 2}),
        "ratio-negative": (422, 42207, {"min.cleanable.dirty.ratio": "-0.1"}),
        "ratio-nan": (422, 42207, {"min.cleanable.dirty.ratio": "nan"}),
        "policy-nope": (422, 42207, {"cleanup.policy": "nope"}),
        "policy-empty": (422, 42207, {"cleanup.policy": ""}),
        "max-message-bytes-negative": (422, 42207, {"max.message.bytes": -1}),
        "value-list": (422, 42206, {"retention.ms": [1000]}),
        "value-object": (422, 42206, {"retention.ms": {"v": 1000}}),
        "value-bool": (422, 42206, {"retention.ms": True}),
        "value-null": (422, 42206, {"retention.ms": None}),  # null means "reset" and only in PATCH
        "one-good-one-bad": (422, 42207, {"retention.ms": "1000", "cleanup.policy": "nope"}),
    }
    for label, (status, code, configs) in bad_configs.items():
        yield create(f"config-{label}", status, code, configs=configs)
        if label != "value-null":
            yield Bad(
                f"patch-config-{label}",
                "PATCH",
                f"/v1/topics/{TOPIC}/configs",
                status,
                code,
                js({"configs": configs}),
            )
    patch = f"/v1/topics/{TOPIC}/configs"
    yield Bad("patch-reset-unknown-name", "PATCH", patch, 422, 42207, js({"configs": {"nope": None}}))
    yield Bad(
        "patch-good-then-unknown-reset",
        "PATCH",
        patch,
        422,
        42207,
        js({"configs": {"retention.ms": "1000", "nope": None}}),
    )
    yield Bad("patch-extra-field", "PATCH", patch, 422, 42206, js({"configs": {}, "extra": 1}))
    yield Bad("patch-configs-list", "PATCH", patch, 422, 42206, js({"configs": ["retention.ms"]}))
    yield Bad("patch-configs-null", "PATCH", patch, 422, 42206, js({"configs": None}))

    # --- produce: shapes, types, encodings, limits ----------------------------------------------------------
    yield Bad("produce-empty-records", **produce(records()), status=422, code=42206)
    produce_422: dict[str, dict[str, Any]] = {
        "records-object": {"records": {"value": "x"}},
        "records-null": {"records": None},
        "record-null": records(None),
        "record-string": records("x"),
        "extra-top-field": records({"value": "x"}, extra=1),
        "extra-record-field": records({"value": "x", "offset": 3}),
        "extra-header-field": records({"value": "x", "headers": [{"name": "h", "value": "v", "x": 1}]}),
        "key-int": records({"key": 1, "value": "x"}),
        "value-int": records({"value": 1}),
        "value-object": records({"value": {"a": 1}}),
        "value-bool": records({"value": False}),
        "headers-string": records({"value": "x", "headers": "h"}),
        "headers-object": records({"value": "x", "headers": {"h": "v"}}),
        "header-missing-name": records({"value": "x", "headers": [{"value": "v"}]}),
        "header-name-null": records({"value": "x", "headers": [{"name": None}]}),
        "header-value-int": records({"value": "x", "headers": [{"name": "h", "value": 1}]}),
        "partition-string": records({"value": "x", "partition": "1"}),
        "partition-x": records({"value": "x", "partition": "x"}),
        "partition-negative": records({"value": "x", "partition": -1}),
        "partition-2pow40": records({"value": "x", "partition": 2**40}),
        "partition-float": records({"value": "x", "partition": 1.0}),
        "partition-bool": records({"value": "x", "partition": True}),
        "timestamp-negative": records({"value": "x", "timestamp": -1}),
        "timestamp-float": records({"value": "x", "timestamp": 1.5}),
        "timestamp-string": records({"value": "x", "timestamp": "1700000000000"}),
        "timestamp-2pow63": records({"value": "x", "timestamp": 2**63}),
        "encoding-unknown": records({"value": "x"}, encoding="rot13"),
        "encoding-null": records({"value": "x"}, encoding=None),
        "base64-value-bad-chars": records({"value": "!!!!"}, encoding="base64"),
        "base64-value-bad-padding": records({"value": "abc"}, encoding="base64"),
        "base64-key-bad": records({"key": "a b=", "value": "AA=="}, encoding="base64"),
        "base64-header-value-bad": records(
            {"value": "AA==", "headers": [{"name": "h", "value": "%%%"}]}, encoding="base64"
        ),
        "base64-second-record-bad": records({"value": "AA=="}, {"value": "*"}, encoding="base64"),
        "surrogate-value": records({"value": "\ud800"}),
        "surrogate-key": records({"key": "\udc00", "value": "x"}),
        "surrogate-pair-reversed": records({"value": "\udc00\ud800"}),
        "surrogate-header-name": records({"value": "x", "headers": [{"name": "\ud800"}]}),
        "surrogate-header-value": records({"value": "x", "headers": [{"name": "h", "value": "a\udfff"}]}),
        "surrogate-header-name-base64": records(
            {"value": "AA==", "headers": [{"name": "\ud800"}]}, encoding="base64"
        ),
        "surrogate-second-record": records({"value": "ok"}, {"value": "\ud800"}),
    }
    for label, body in produce_422.items():
        yield Bad(f"produce-{label}", **produce(body), status=422, code=42206)
    yield Bad("produce-missing-records", **produce({"encoding": "utf8"}), status=422, code=42206)
    yield Bad(
        "produce-compacted-without-key",
        **produce(records({"key": "k", "value": "v"}, {"value": "no key"}), topic=COMPACTED),
        status=422,
        code=42206,
    )
    yield Bad(
        "produce-compacted-null-key",
        **produce(records({"key": None, "value": "v"}), topic=COMPACTED),
        status=422,
        code=42206,
    )
    yield Bad(
        "produce-too-many-records",
        **produce(records(*[{"value": str(i)} for i in range(MAX_RECORDS + 1)])),
        status=413,
        code=41301,
    )
    yield Bad(
        "produce-record-over-max-message-bytes",
        **produce(records({"key": "k", "value": "x" * 200}), topic=SMALL),
        status=413,
        code=41301,
    )
    yield Bad(
        "produce-second-record-over-max-message-bytes",
        **produce(records({"value": "ok"}, {"value": "x" * 200}), topic=SMALL),
        status=413,
        code=41301,
    )
    oversize = js(records({"value": "x" * (MAX_REQUEST_BYTES + 100)}))
    yield Bad("produce-body-over-limit", "POST", f"/v1/topics/{TOPIC}/records", 413, 41301, oversize)
    yield Bad(
        "produce-body-over-limit-chunked",
        "POST",
        f"/v1/topics/{TOPIC}/records",
        413,
        41301,
        oversize,
        chunked=True,
    )
    yield Bad("create-body-over-limit-chunked", "POST", "/v1/topics", 413, 41301, b"[" * 5000, chunked=True)
    yield Bad("create-body-over-limit", "POST", "/v1/topics", 413, 41301, b"[" * 5000)
    yield Bad(
        "produce-unknown-topic", **produce(records({"value": "x"}), topic="nope"), status=404, code=40401
    )
    yield Bad(
        "produce-unknown-partition",
        **produce(records({"value": "ok", "partition": 0}, {"value": "x", "partition": 2})),
        status=404,
        code=40402,
    )
    yield Bad(
        "produce-partition-max",
        **produce(records({"value": "x", "partition": 10_000})),
        status=404,
        code=40402,
    )

    # --- Idempotency-Key ------------------------------------------------------------------------------------
    idempotency_keys: dict[str, str | bytes] = {
        "too-long": "k" * 201,
        "non-ascii": "clé".encode(),
        "empty": "",
        "inner-space": "a b",
        "latin1-byte": b"\xe9",
    }
    for label, key in idempotency_keys.items():
        yield Bad(
            f"idempotency-key-{label}",
            **produce(records({"value": "x"})),
            status=400,
            code=40001,
            headers={"Idempotency-Key": key},
        )

    # --- fetch and offsets: partitions and query parameters -------------------------------------------------
    for label, partition in {
        "negative": "-1",
        "x": "x",
        "float": "1.5",
        "2pow40": str(2**40),
        "2pow63": str(2**63),
    }.items():
        yield Bad(
            f"fetch-partition-{label}",
            "GET",
            f"/v1/topics/{TOPIC}/partitions/{partition}/records",
            400,
            40001,
        )
        yield Bad(
            f"offsets-partition-{label}",
            "GET",
            f"/v1/topics/{TOPIC}/partitions/{partition}/offsets",
            400,
            40001,
        )
    yield Bad(
        "fetch-unknown-partition", "GET", f"/v1/topics/{TOPIC}/partitions/2/records?max_wait_ms=0", 404, 40402
    )
    yield Bad("offsets-unknown-partition", "GET", f"/v1/topics/{TOPIC}/partitions/2/offsets", 404, 40402)
    yield Bad("fetch-unknown-topic", "GET", "/v1/topics/nope/partitions/0/records?max_wait_ms=0", 404, 40401)
    yield Bad("offsets-unknown-topic", "GET", "/v1/topics/nope/partitions/0/offsets", 404, 40401)
    fetch_queries: dict[str, tuple[int, int, str]] = {
        "offset-negative": (416, 41601, "offset=-1"),
        "offset-past-high-watermark": (416, 41601, "offset=4"),
        "offset-max-long": (416, 41601, f"offset={2**63 - 1}"),
        "offset-2pow63": (400, 40001, f"offset={2**63}"),
        "offset-10pow30": (400, 40001, f"offset={10**30}"),
        "offset-5000-digits": (400, 40001, "offset=" + "9" * 5000),
        "offset-x": (400, 40001, "offset=x"),
        "offset-empty": (400, 40001, "offset="),
        "offset-float": (400, 40001, "offset=1.5"),
        "max-bytes-zero": (400, 40001, "max_bytes=0"),
        "max-bytes-negative": (400, 40001, "max_bytes=-1"),
        "max-bytes-huge": (400, 40001, f"max_bytes={10**30}"),
        "max-bytes-over-64mib": (400, 40001, f"max_bytes={64 * 1024 * 1024 + 1}"),
        "max-wait-negative": (400, 40001, "max_wait_ms=-1"),
        "max-wait-over-60s": (400, 40001, "max_wait_ms=60001"),
        "max-wait-x": (400, 40001, "max_wait_ms=soon"),
        "encoding-unknown": (400, 40001, "encoding=rot13"),
        "encoding-empty": (400, 40001, "encoding="),
        "encoding-uppercase": (400, 40001, "encoding=UTF8"),
    }
    for label, (status, code, query) in fetch_queries.items():
        yield Bad(f"fetch-{label}", "GET", f"{FETCH}?max_wait_ms=0&{query}", status, code)
    yield Bad("fetch-not-utf8", "GET", f"/v1/topics/{BINARY}/partitions/0/records?max_wait_ms=0", 406, 40601)

    # --- deleting records (DELETE on a partition's records): refusals delete nothing ---------------------
    delete_queries = {
        "missing": (400, 40001, ""),
        "negative": (400, 40001, "before_offset=-1"),
        "not-a-number": (400, 40001, "before_offset=soon"),
        "past-the-high-watermark": (416, 41601, f"before_offset={10**12}"),
    }
    for label, (status, code, query) in delete_queries.items():
        yield Bad(f"delete-records-{label}", "DELETE", f"{FETCH}?{query}", status, code)
    yield Bad(
        "delete-records-unknown-partition",
        "DELETE",
        f"/v1/topics/{TOPIC}/partitions/7/records?before_offset=0",
        404,
        40402,
    )

    # --- unknown topic on every topic route -----------------------------------------------------------------
    yield Bad("describe-unknown-topic", "GET", "/v1/topics/nope", 404, 40401)
    yield Bad("delete-unknown-topic", "DELETE", "/v1/topics/nope", 404, 40401)
    yield Bad(
        "delete-records-unknown-topic",
        "DELETE",
        "/v1/topics/nope/partitions/0/records?before_offset=0",
        404,
        40401,
    )
    yield Bad("compact-unknown-topic", "POST", "/v1/topics/nope/compact", 404, 40401)
    yield Bad(
        "patch-unknown-topic",
        "PATCH",
        "/v1/topics/nope/configs",
        404,
        40401,
        js({"configs": {"retention.ms": 1}}),
    )

    # --- consumer groups: ids and bodies --------------------------------------------------------------------
    bad_groups = {
        "space": "bad group",
        "250-chars": "g" * 250,
        "unicode": "grüppe",
        "nul": "\x00",
        "colon": "a:b",
    }
    commit = js({"offsets": [{"topic": TOPIC, "partition": 0, "offset": 1}]})
    for label, group in bad_groups.items():
        yield Bad(f"group-id-{label}-read", "GET", f"/v1/groups/{enc(group)}/offsets", 400, 40001)
        yield Bad(f"group-id-{label}-commit", "PUT", f"/v1/groups/{enc(group)}/offsets", 400, 40001, commit)
    yield Bad("group-id-empty-read", "GET", "/v1/groups//offsets", 404, 40400)
    yield Bad("group-id-slash-commit", "PUT", "/v1/groups/a/b/offsets", 404, 40400, commit)
    group_bodies: dict[str, tuple[int, int, object]] = {
        "offsets-empty": (422, 42206, {"offsets": []}),
        "offsets-object": (422, 42206, {"offsets": {"topic": TOPIC}}),
        "entry-null": (422, 42206, {"offsets": [None]}),
        "missing-offset": (422, 42206, {"offsets": [{"topic": TOPIC, "partition": 0}]}),
        "missing-topic": (422, 42206, {"offsets": [{"partition": 0, "offset": 1}]}),
        "offset-negative": (422, 42206, {"offsets": [{"topic": TOPIC, "partition": 0, "offset": -1}]}),
        "offset-2pow63": (422, 42206, {"offsets": [{"topic": TOPIC, "partition": 0, "offset": 2**63}]}),
        "offset-string": (422, 42206, {"offsets": [{"topic": TOPIC, "partition": 0, "offset": "1"}]}),
        "offset-float": (422, 42206, {"offsets": [{"topic": TOPIC, "partition": 0, "offset": 1.0}]}),
        "partition-negative": (422, 42206, {"offsets": [{"topic": TOPIC, "partition": -1, "offset": 1}]}),
        "partition-string": (422, 42206, {"offsets": [{"topic": TOPIC, "partition": "0", "offset": 1}]}),
        "topic-int": (422, 42206, {"offsets": [{"topic": 1, "partition": 0, "offset": 1}]}),
        "extra-entry-field": (
            422,
            42206,
            {"offsets": [{"topic": TOPIC, "partition": 0, "offset": 1, "metadata": "m"}]},
        ),
        "extra-top-field": (422, 42206, {"offsets": [{"topic": TOPIC, "partition": 0, "offset": 1}], "x": 1}),
        "unknown-topic": (404, 40401, {"offsets": [{"topic": "nope", "partition": 0, "offset": 1}]}),
        "unknown-partition": (404, 40402, {"offsets": [{"topic": TOPIC, "partition": 2, "offset": 1}]}),
        # All or nothing: the valid first entry must not be committed either.
        "good-then-unknown-partition": (
            404,
            40402,
            {
                "offsets": [
                    {"topic": TOPIC, "partition": 0, "offset": 99},
                    {"topic": TOPIC, "partition": 7, "offset": 1},
                ]
            },
        ),
        "good-then-bad-topic-name": (
            400,
            40003,
            {
                "offsets": [
                    {"topic": TOPIC, "partition": 0, "offset": 99},
                    {"topic": "bad name", "partition": 0, "offset": 1},
                ]
            },
        ),
    }
    for label, (status, code, body) in group_bodies.items():
        yield Bad(f"group-commit-{label}", "PUT", f"/v1/groups/{GROUP}/offsets", status, code, js(body))

    # --- routing: wrong methods and unknown routes ----------------------------------------------------------
    wrong_methods = [
        ("PUT", "/v1/topics"),
        ("DELETE", "/v1/topics"),
        ("PATCH", "/v1/topics"),
        ("POST", f"/v1/topics/{TOPIC}"),
        ("PUT", f"/v1/topics/{TOPIC}"),
        ("PATCH", f"/v1/topics/{TOPIC}"),
        ("GET", f"/v1/topics/{TOPIC}/records"),
        ("PUT", f"/v1/topics/{TOPIC}/records"),
        ("DELETE", f"/v1/topics/{TOPIC}/records"),
        ("GET", f"/v1/topics/{TOPIC}/configs"),
        ("GET", f"/v1/topics/{TOPIC}/compact"),
        ("DELETE", f"/v1/topics/{TOPIC}/compact"),
        ("PUT", f"/v1/topics/{TOPIC}/configs"),
        ("POST", FETCH),
        ("POST", f"/v1/topics/{TOPIC}/partitions/0/offsets"),
        ("POST", f"/v1/groups/{GROUP}/offsets"),
        ("DELETE", f"/v1/groups/{GROUP}/offsets"),
        ("POST", "/healthz"),
        ("DELETE", "/readyz"),
        ("OPTIONS", "/v1/topics"),
        ("DELETE", f"/v1/topics/{TOPIC}/partitions"),  # GET lists them, POST adds some
    ]
    for method, path in wrong_methods:
        yield Bad(f"method-{method}-{path}", method, path, 405, 40500, js({}) if method != "GET" else None)
    for path in (
        "/",
        "/nope",
        "/v1",
        "/v2/topics",
        "/v1/topic",
        f"/v1/topics/{TOPIC}/partitions/0",
        f"/v1/topics/{TOPIC}/partitions/0/records/0",
        f"/v1/groups/{GROUP}/members",
        f"/v1/groups/{GROUP}/offsets/{TOPIC}",
    ):
        yield Bad(f"route-{path}", "GET", path, 404, 40400)

    # --- Content-Type: only JSON bodies are parsed; anything else is not an object --------------------------
    good_create = js({"name": "fresh"})
    good_produce = js(records({"value": "x"}))
    for label, content_type in {
        "text-plain": "text/plain",
        "form": "application/x-www-form-urlencoded",
        "multipart": "multipart/form-data; boundary=x",
        "octet-stream": "application/octet-stream",
        "xml": "application/xml",
        "missing": None,
    }.items():
        yield Bad(f"content-type-{label}-create", "POST", "/v1/topics", 422, 42206, good_create, content_type)
        yield Bad(
            f"content-type-{label}-produce",
            "POST",
            f"/v1/topics/{TOPIC}/records",
            422,
            42206,
            good_produce,
            content_type,
        )


CASES = list(cases())


def _setup(srv: RunningServer) -> None:
    srv.create_topic(TOPIC, partitions=2)
    srv.create_topic(SMALL, **{"max.message.bytes": 100})
    srv.create_topic(COMPACTED, **{"cleanup.policy": "compact"})
    srv.create_topic(BINARY)
    sent = srv.produce(
        TOPIC,
        [
            {"key": "a", "value": "one", "partition": 0, "headers": [{"name": "h", "value": "v"}]},
            {"key": "b", "value": "two", "partition": 0},
            {"key": None, "value": "three", "partition": 1},
            {"key": "c", "value": None, "partition": 0, "timestamp": 1_700_000_000_000},
        ],
    )
    assert sent.status_code == 200, sent.text
    assert srv.produce(COMPACTED, [{"key": "k", "value": "v"}]).status_code == 200
    assert srv.produce(SMALL, [{"key": "k", "value": "small enough"}]).status_code == 200
    binary = {"records": [{"value": base64.b64encode(b"\xff\xfe").decode()}], "encoding": "base64"}
    assert srv.client.post(f"/v1/topics/{BINARY}/records", json=binary).status_code == 200
    committed = srv.client.put(
        f"/v1/groups/{GROUP}/offsets",
        json={
            "offsets": [
                {"topic": TOPIC, "partition": 0, "offset": 2},
                {"topic": TOPIC, "partition": 1, "offset": 1},
            ]
        },
    )
    assert committed.status_code == 200, committed.text


def snapshot(srv: RunningServer) -> dict[str, Any]:
    """Everything a bad request could change, as the API reports it, plus the object-store PUT count."""
    client = srv.client
    state: dict[str, Any] = {"topics": client.get("/v1/topics").json(), "puts": srv.runtime.counters.get(PUT)}
    for name in state["topics"]["topics"]:
        described = client.get(f"/v1/topics/{name}").json()
        state[f"topic:{name}"] = described
        for p in described["partitions"]:
            fetched = srv.fetch(name, p["partition"], 0, encoding="base64")
            state[f"records:{name}/{p['partition']}"] = fetched.json()
    state["group"] = client.get(f"/v1/groups/{GROUP}/offsets").json()
    return state


@contextmanager
def _serve(tmp_path_factory: pytest.TempPathFactory, **overrides: Any) -> Iterator[RunningServer]:
    with run_server(local_settings(tmp_path_factory.mktemp("bad-input"), **overrides)) as srv:
        _setup(srv)
        state = snapshot(srv)
        assert state["topics"] == {"topics": sorted([BINARY, COMPACTED, SMALL, TOPIC])}
        assert state[f"topic:{TOPIC}"]["partitions"][0]["high_watermark"] == 3
        yield srv


@pytest.fixture(scope="module")
def limited_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with _serve(
        tmp_path_factory, max_records_per_request=MAX_RECORDS, max_request_bytes=MAX_REQUEST_BYTES
    ) as srv:
        yield srv


@pytest.fixture(scope="module")
def roomy_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with _serve(tmp_path_factory) as srv:
        yield srv


def _send(srv: RunningServer, case: Bad) -> httpx.Response:
    headers: dict[str, str | bytes] = dict(case.headers)
    if case.content_type is not None:
        headers["Content-Type"] = case.content_type
    content: Any = case.body
    if case.chunked and case.body is not None:
        body = case.body
        content = (body[i : i + 100] for i in range(0, len(body), 100))
    return srv.client.request(case.method, case.path, content=content, headers=headers)


def test_cases_are_unique() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_and_changes_nothing(request: pytest.FixtureRequest, case: Bad) -> None:
    srv: RunningServer = request.getfixturevalue("roomy_server" if case.roomy else "limited_server")
    before = snapshot(srv)
    response = _send(srv, case)
    if case.chunked:
        assert response.request.headers["transfer-encoding"] == "chunked"
    assert response.status_code == case.status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error_code", "message"}, body
    assert body["error_code"] == case.code, body
    assert isinstance(body["message"], str)
    assert body["message"].strip()
    assert snapshot(srv) == before
