"""The console's Schemas page and typed record view in a real browser (Debian's Chromium), against a real
agent and its schema registry.

- The Schemas page: subjects with their latest version, type, level and mode; a subject's versions, the
  text of one and a diff between two; the level and mode changed and reset; a registration refused as
  incompatible with the reasons shown, then one accepted; soft and permanent deletes of a version and of
  the subject; a new subject registered from the list.
- The record browser: values written by confluent-kafka's Avro, Protobuf and JSON Schema serializers
  through the Kafka door show as JSON with their subject and version; bytes naming no registered schema say
  why, and plain text shows as before.
- A principal without subject permissions sees the registry's refusal (403, 40301) as a message.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient, record_subject_name_strategy
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from playwright.sync_api import Browser, Page, expect

from tests.fixtures.principals import PASSWORDS, write_principals
from tests.fixtures.server import RunningServer, local_settings, run_server
from tests.ui.pages import open_page

pytestmark = pytest.mark.integration

SUBJECT = "orders-value"


def avro(*extra: dict[str, Any]) -> str:
    fields = [{"name": "name", "type": "string"}, *extra]
    return json.dumps({"type": "record", "name": "User", "namespace": "shop", "fields": fields})


V1 = avro()
V2 = avro({"name": "age", "type": "int", "default": 0})
# Under BACKWARD, a new field needs a default: the new schema could not read what V2 wrote.
NO_DEFAULT = avro({"name": "age", "type": "int", "default": 0}, {"name": "email", "type": "string"})
V3 = avro(
    {"name": "age", "type": "int", "default": 0},
    {"name": "email", "type": ["null", "string"], "default": None},
)
JSON_ITEM = json.dumps(
    {
        "title": "Item",
        "type": "object",
        "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
        "required": ["sku"],
    }
)
PROTO = 'syntax = "proto3";\npackage shop;\nmessage Refund { int64 amount = 1; }\n'


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[RunningServer]:
    with run_server(local_settings(tmp_path)) as running:
        yield running


@pytest.fixture
def sr(srv: RunningServer) -> Iterator[httpx.Client]:
    """The registry's API under /schema-registry on the HTTP port, as the console calls it."""
    with httpx.Client(base_url=srv.registry_prefix_url, timeout=30) as client:
        yield client


def register(sr: httpx.Client, subject: str, schema: str, kind: str = "AVRO") -> dict[str, Any]:
    answer = sr.post(f"/subjects/{subject}/versions", json={"schema": schema, "schemaType": kind})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def confirm(page: Page, typed: str | None = None) -> None:
    expect(page.locator("#confirm")).to_be_visible()
    if typed is not None:
        page.fill("#confirm-typed", typed)
    page.click("#confirm-ok")


def test_the_schemas_page(
    browser: Browser, srv: RunningServer, sr: httpx.Client, screenshot_dir: Path
) -> None:
    register(sr, SUBJECT, V1)
    register(sr, SUBJECT, V2)
    register(sr, "items-value", JSON_ITEM, "JSON")
    register(sr, "refunds-value", PROTO, "PROTOBUF")
    page = open_page(browser, f"{srv.url}/ui")
    page.click("header >> text=Schemas")

    # The list: latest version, type, and the global level and mode each subject inherits.
    rows = page.locator("#subjects tbody tr")
    expect(rows).to_have_count(3)
    expect(page.locator("#global-level")).to_have_text("BACKWARD")
    orders = page.locator("#subjects tbody tr", has_text=SUBJECT)
    for text in ("AVRO", "BACKWARD (global)", "READWRITE (global)"):
        expect(orders).to_contain_text(text)
    expect(orders.locator("td").nth(1)).to_have_text("2")
    expect(page.locator("#subjects tbody tr", has_text="items-value")).to_contain_text("JSON")
    expect(page.locator("#subjects tbody tr", has_text="refunds-value")).to_contain_text("PROTOBUF")
    page.screenshot(path=str(screenshot_dir / "schemas.png"), full_page=True)

    # A subject: its versions, the latest one's text pretty-printed, and the diff from v1 to v2.
    page.click(f"#subjects a:text-is('{SUBJECT}')")
    expect(page.locator("#subject-name")).to_have_text(SUBJECT)
    expect(page.locator("#versions tbody tr")).to_have_count(2)
    expect(page.locator("#schema-body")).to_contain_text('"name": "age"')
    added = page.locator("#diff .line.add")
    expect(added.filter(has_text='"name": "age"')).to_have_count(1)
    expect(page.locator("#diff .line.del")).to_have_count(0)
    expect(page.locator("#diff-summary")).to_have_text("+5 \u22120 lines")
    page.screenshot(path=str(screenshot_dir / "schema-diff.png"), full_page=True)
    page.select_option("#diff-from", "2")
    expect(page.locator("#diff-summary")).to_have_text("The two versions have the same text.")
    page.click("#versions a:text-is('1')")
    expect(page.locator("#schema-body")).not_to_contain_text("age")

    # The level: set on the subject, then back to the global one.
    page.select_option("#set-level", "FULL")
    page.click("#save-level")
    expect(page.locator("#subject-level")).to_have_text("FULL")
    assert sr.get(f"/config/{SUBJECT}").json() == {"compatibilityLevel": "FULL"}
    page.click("#reset-level")
    expect(page.locator("#subject-level")).to_have_text("BACKWARD (global)")
    assert sr.get(f"/config/{SUBJECT}").json()["error_code"] == 40408

    # The mode: READONLY refuses registrations (42205), and the page shows the registry's message.
    page.select_option("#set-mode", "READONLY")
    page.click("#save-mode")
    expect(page.locator("#subject-mode")).to_have_text("READONLY")
    page.fill("#register-schema", V3)
    page.click("#register-send")
    expect(page.locator("#register-error")).to_contain_text("42205")
    page.click("#reset-mode")
    expect(page.locator("#subject-mode")).to_have_text("READWRITE (global)")

    # An incompatible schema is checked first and not registered; the reasons show.
    page.fill("#register-schema", NO_DEFAULT)
    page.click("#register-send")
    expect(page.locator("#compat-bad")).to_contain_text("email")
    expect(page.locator("#flash .msg.error").last).to_contain_text("incompatible")
    assert sr.get(f"/subjects/{SUBJECT}/versions").json() == [1, 2]
    page.fill("#register-schema", V3)
    page.click("#check-schema")
    expect(page.locator("#compat-ok")).to_be_visible()
    page.click("#register-send")
    expect(page.locator("#flash .msg").last).to_contain_text(f"Registered {SUBJECT} version 3")
    expect(page.locator("#versions tbody tr")).to_have_count(3)

    # Version 3: soft-deleted, then permanently (typed confirmation).
    page.click("button[data-delete-version='3']")
    confirm(page)
    expect(page.locator("#versions tbody tr").nth(2)).to_contain_text("soft-deleted")
    assert sr.get(f"/subjects/{SUBJECT}/versions").json() == [1, 2]
    page.click("button[data-delete-version='3']")
    confirm(page, f"{SUBJECT} v3")
    expect(page.locator("#versions tbody tr")).to_have_count(2)
    assert sr.get(f"/subjects/{SUBJECT}/versions", params={"deleted": "true"}).json() == [1, 2]

    # The subject: soft-deleted, then permanently.
    page.click("#delete-subject")
    confirm(page, SUBJECT)
    expect(page.locator("#versions tbody tr.deleted")).to_have_count(2)
    expect(page.locator("#delete-subject")).to_have_text("Delete subject permanently")
    page.click("#delete-subject")
    confirm(page, SUBJECT)
    expect(page.locator("#subjects tbody tr")).to_have_count(2)
    assert SUBJECT not in sr.get("/subjects", params={"deleted": "true"}).json()

    # A new subject from the list's form, then the global level.
    page.click("#register summary")
    page.fill("#register-subject", "payments-value")
    page.fill("#register-schema", V1)
    page.click("#register-send")
    expect(page.locator("#subject-name")).to_have_text("payments-value")
    expect(page.locator("#versions tbody tr")).to_have_count(1)
    # A subject holding "/" is one path segment, in the console's address and in the registry's.
    register(sr, "team%2Forders", V1)
    page.goto(f"{srv.url}/ui#/schemas?prefix=team")
    page.click("#subjects a:text-is('team/orders')")
    expect(page.locator("#subject-name")).to_have_text("team/orders")
    expect(page.locator("#versions tbody tr")).to_have_count(1)
    page.goto(f"{srv.url}/ui#/schemas/:global")
    page.select_option("#set-global-level", "FORWARD")
    page.click("#save-global-level")
    expect(page.locator("#global-level")).to_have_text("FORWARD")
    assert sr.get("/config").json() == {"compatibilityLevel": "FORWARD"}
    assert page.errors == []  # type: ignore[attr-defined]


def _refund_class() -> Any:
    """A message class built from a descriptor written here (no generated code, no Strata component)."""
    file = descriptor_pb2.FileDescriptorProto(name="refund.proto", package="shop", syntax="proto3")
    message = file.message_type.add(name="Refund")
    message.field.add(
        name="order_id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1
    )
    message.field.add(name="amount", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Refund"))


def test_the_record_browser_decodes_typed_values(
    browser: Browser, srv: RunningServer, screenshot_dir: Path
) -> None:
    topic = "typed"
    srv.create_topic(topic)
    by_record = {"subject.name.strategy": record_subject_name_strategy}
    refund = _refund_class()
    with SchemaRegistryClient({"url": srv.registry_url}) as client:
        values = [
            AvroSerializer(client, V2, conf=by_record)({"name": "Ada", "age": 36}, _ctx(topic)),
            ProtobufSerializer(refund, client, by_record)(refund(order_id="o-7", amount=1250), _ctx(topic)),
            JSONSerializer(JSON_ITEM, client, conf=by_record)({"sku": "a-1", "qty": 2}, _ctx(topic)),
            b"\x00\x00\x00\x03\xe7not registered",  # schema id 999
            b"plain text",
        ]
        key = AvroSerializer(client, '"string"')("user-1", _ctx(topic, MessageField.KEY))
    producer = Producer({"bootstrap.servers": srv.kafka_bootstrap})
    for value in values:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(30) == 0

    # The page receives the decoded values (JSON) with their subject, version, id and type.
    page_json = srv.client.get(f"/v1/topics/{topic}/browse").json()
    typed = [r["value_typed"] for r in page_json["records"]]
    assert [(t["subject"], t["version"], t["schema_type"], t["error"]) for t in typed[:3]] == [
        ("shop.User", 1, "AVRO", None),
        ("shop.Refund", 1, "PROTOBUF", None),
        ("Item", 1, "JSON", None),
    ]
    assert [t["json"] for t in typed[:3]] == [
        {"name": "Ada", "age": 36},
        {"orderId": "o-7", "amount": "1250"},  # protobuf's JSON mapping: camelCase, int64 as a string
        {"sku": "a-1", "qty": 2},
    ]
    assert typed[3] == {
        "schema_id": 999,
        "schema_type": None,
        "subject": None,
        "version": None,
        "json": None,
        "error": "schema id 999 is not registered",
    }
    assert typed[4] is None
    assert {r["key_typed"]["subject"] for r in page_json["records"]} == {f"{topic}-key"}
    assert (
        srv.client.get(f"/v1/topics/{topic}/browse", params={"decode": "false"}).json()["records"][0][
            "value_typed"
        ]
        is None
    )

    page = open_page(browser, f"{srv.url}/ui#/topics/{topic}/records")
    rows = page.locator("#records tr.record")
    expect(rows).to_have_count(5)
    value = [rows.nth(i).locator("td.data").nth(1) for i in range(5)]
    expect(value[0].locator(".typed")).to_have_text(f"shop.User v1 · AVRO · id {typed[0]['schema_id']}")
    expect(value[0]).to_contain_text('"name": "Ada"')
    expect(value[1].locator(".typed")).to_contain_text("shop.Refund v1 · PROTOBUF")
    expect(value[1]).to_contain_text('"orderId": "o-7"')
    expect(value[2].locator(".typed")).to_contain_text("Item v1 · JSON")
    expect(value[2]).to_contain_text('"qty": 2')
    expect(value[3].locator(".typed.bad")).to_have_text(
        "not decoded (schema id 999): schema id 999 is not registered"
    )
    expect(value[3]).to_contain_text("not registered")
    expect(value[4]).to_have_text("plain text")
    expect(rows.first.locator("td.data").first).to_contain_text(f"{topic}-key v1 · AVRO")
    expect(rows.first.locator("td.data").first).to_contain_text('"user-1"')
    page.screenshot(path=str(screenshot_dir / "records-typed.png"), full_page=True)
    # The raw views show bytes, as before; the subject's link opens its page at that version.
    page.select_option("#browse-view", "hex")
    expect(page.locator("#records .typed")).to_have_count(0)
    expect(value[4]).to_have_text(" ".join(f"{b:02x}" for b in b"plain text"))
    page.select_option("#browse-view", "decoded")
    value[0].locator(".typed a").click()
    expect(page.locator("#subject-name")).to_have_text("shop.User")
    expect(page.locator("#schema-text h2")).to_have_text("Version 1")
    assert page.errors == []  # type: ignore[attr-defined]


def _ctx(topic: str, field: str = MessageField.VALUE) -> SerializationContext:
    return SerializationContext(topic, field)


def test_a_principal_without_subject_permissions_sees_the_refusal(browser: Browser, tmp_path: Path) -> None:
    settings = local_settings(tmp_path, principals_file=write_principals(tmp_path))
    admin = httpx.BasicAuth("admin", PASSWORDS["admin"])
    with (
        run_server(settings) as srv,
        httpx.Client(base_url=srv.registry_prefix_url, auth=admin, timeout=30) as sr,
    ):
        schema_id = register(sr, SUBJECT, V1)["id"]
        assert srv.client.post("/v1/topics", json={"name": "orders.eu"}, auth=admin).status_code == 201
        auth = {"basic.auth.user.info": f"admin:{PASSWORDS['admin']}"}
        with SchemaRegistryClient({"url": srv.registry_url, **auth}) as client:
            value = AvroSerializer(client, V1)({"name": "Ada"}, _ctx("orders"))
        body = {"records": [{"value": base64.b64encode(value).decode()}], "encoding": "base64"}
        assert srv.client.post("/v1/topics/orders.eu/records", json=body, auth=admin).status_code == 200

        # The admin's browser credentials reach the registry under /schema-registry: the page lists it.
        creds = {"username": "admin", "password": PASSWORDS["admin"]}
        page = open_page(browser, f"{srv.url}/ui#/schemas", http_credentials=creds)
        expect(page.locator("#subjects tbody tr")).to_have_count(1)
        page.goto(f"{srv.url}/ui#/topics/orders.eu/records")
        expect(page.locator("#records .typed")).to_contain_text(f"{SUBJECT} v1 · AVRO")

        # bob may read the orders.* topics and no subject: the list is empty, a subject's page and a
        # registration show the registry's refusal, and the record browser does not decode for him.
        creds = {"username": "bob", "password": PASSWORDS["bob"]}
        page = open_page(browser, f"{srv.url}/ui#/schemas", http_credentials=creds)
        expect(page.locator("#subjects tbody")).to_contain_text("No subjects yet")
        expect(page.locator("#global-level")).to_have_text("not allowed to see")
        page.click("#register summary")
        page.fill("#register-subject", SUBJECT)
        page.fill("#register-schema", V2)
        page.click("#register-send")
        refusal = page.locator("#flash .msg.error").last
        expect(refusal).to_contain_text("Permission denied")
        expect(refusal).to_contain_text("40301")
        expect(refusal).to_contain_text("'bob'")
        assert sr.get(f"/subjects/{SUBJECT}/versions").json() == [1]
        page.goto(f"{srv.url}/ui#/schemas/{SUBJECT}")
        forbidden = page.locator("#schemas-forbidden")
        expect(forbidden).to_contain_text(f"You may not read subject {SUBJECT}. Permission denied")
        expect(forbidden).to_contain_text("40301")
        page.goto(f"{srv.url}/ui#/topics/orders.eu/records")
        why = f"not allowed to read a subject holding schema id {schema_id}"
        expect(page.locator("#records .typed.bad")).to_have_text(
            f"not decoded (schema id {schema_id}): {why}"
        )
        assert page.errors == []  # type: ignore[attr-defined]
