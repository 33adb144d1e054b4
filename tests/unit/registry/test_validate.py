"""Validation on produce, rule by rule (registry/validate.py): null fields, both framings, registration
under the strategy's subject, Protobuf message indexes, payload level, which record is named, and the
counts. The registry's facts come from an in-memory lookup (validation_fakes.FakeLookup); the schemas are
the registry's own parses."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.formats import avro, jsonschema
from registry.validate import record_name, subject_for
from registry.verdicts import FieldRule, RecordRefused, rules_of
from storage.records import compression
from storage.topic_config import TopicConfig
from tests.examples import examples
from tests.unit.registry.validation_fakes import (
    AVRO,
    AVRO_KEY,
    JSON,
    KEY,
    PROTOBUF,
    VALUE,
    Counts,
    FakeLookup,
    avro_bytes,
    batch,
    check,
    framed,
    guid_header,
    validator,
)

ORDER = avro_bytes({"id": 1, "item": "tea"})


@pytest.fixture
def lookup() -> FakeLookup:
    found = FakeLookup()
    found.register(17, "orders-value", AVRO)
    found.register(18, "orders-key", AVRO_KEY)
    return found


def refusal(lookup: FakeLookup, rules: list[FieldRule], data: bytes, topic: str = "orders") -> str:
    with pytest.raises(RecordRefused) as caught:
        check(validator(lookup), topic, rules, data)
    return caught.value.message


# --- rules 1 and 2: null fields, and the two framings ------------------------------------------------------


def test_framed_values_and_tombstones_pass(lookup: FakeLookup) -> None:
    counts = Counts()
    tally = check(validator(lookup, metrics=counts), "orders", [VALUE], batch([framed(17, ORDER), None]))
    assert tally.counts == {("orders", "value", "valid"): 1, ("orders", "value", "null"): 1}
    assert counts.validated == tally.counts


def test_a_null_key_passes_the_key_check(lookup: FakeLookup) -> None:
    key = framed(18, b"\x06abc")
    tally = check(validator(lookup), "orders", [KEY], batch([b"x", b"y"], keys=[None, key]))
    assert tally.counts == {("orders", "key", "null"): 1, ("orders", "key", "valid"): 1}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"", "the value is 0 bytes, too short for magic byte 0 and a 4-byte schema id"),
        (b"\x00\x00\x00\x11", "the value is 4 bytes, too short for magic byte 0 and a 4-byte schema id"),
        (b'{"plain": "json"}', "the value starts with byte 123, not magic byte 0 of a schema id, and has no"),
        (b"\x01" + bytes(20), "the value starts with byte 1, not magic byte 0"),
    ],
)
def test_a_value_without_the_framing_fails(lookup: FakeLookup, value: bytes, reason: str) -> None:
    assert refusal(lookup, [VALUE], batch([framed(17, ORDER), value])).startswith(f"record 1: {reason}")


def test_the_header_form_resolves_by_guid(lookup: FakeLookup) -> None:
    guid = lookup.register(17, "orders-value", AVRO)
    headers = {0: [guid_header("value", guid)]}
    # The field is the payload alone; a header wins over what the field starts with.
    check(validator(lookup), "orders", [VALUE], batch([ORDER], headers=headers))
    unknown = {0: [guid_header("value", "00000000-0000-4000-8000-000000000000")]}
    assert refusal(lookup, [VALUE], batch([framed(17, ORDER)], headers=unknown)) == (
        "record 0: schema GUID 00000000-0000-4000-8000-000000000000 is not registered"
    )


@pytest.mark.parametrize(
    "header_value", [None, b"\x01" + bytes(15), b"\x00" + bytes(16), b"\x00\x00\x00\x00\x11"]
)
def test_a_schema_header_that_is_not_magic_1_and_a_guid_fails(
    lookup: FakeLookup, header_value: bytes | None
) -> None:
    from storage.records import Header

    headers = {0: [Header("__value_schema_id", header_value)]}
    assert refusal(lookup, [VALUE], batch([framed(17, ORDER)], headers=headers)) == (
        "record 0: header __value_schema_id does not hold magic byte 1 and a 16-byte schema GUID"
    )


def test_the_key_header_is_read_for_the_key_only(lookup: FakeLookup) -> None:
    guid = lookup.register(18, "orders-key", AVRO_KEY)
    headers = {0: [guid_header("key", guid)]}
    check(
        validator(lookup), "orders", [KEY, VALUE], batch([framed(17, ORDER)], [b"\x06abc"], headers=headers)
    )


def test_bytes_after_the_guid_of_a_schema_without_message_indexes_fail(lookup: FakeLookup) -> None:
    guid = lookup.register(17, "orders-value", AVRO)
    headers = {0: [guid_header("value", guid, [0])]}
    assert "has 1 bytes after the GUID of a AVRO schema" in refusal(
        lookup, [VALUE], batch([ORDER], headers=headers)
    )


# --- rule 3: registered under the strategy's subject ----------------------------------------------------


def test_an_unknown_id_fails(lookup: FakeLookup) -> None:
    assert refusal(lookup, [VALUE], batch([framed(99, ORDER)])) == "record 0: schema id 99 is not registered"


def test_an_id_of_another_subject_fails_naming_the_record_and_subject(lookup: FakeLookup) -> None:
    values = [framed(17, ORDER)] * 3 + [framed(18, b"\x06abc")]
    assert refusal(lookup, [VALUE], batch(values)) == (
        "record 3: schema id 18 is not registered under subject orders-value"
    )


def test_a_soft_deleted_version_still_counts(lookup: FakeLookup) -> None:
    # The lookup's subjects include soft-deleted versions (StoreLookup asks with include_deleted): a
    # producer may still write with a version its subject deleted, as Redpanda allows.
    lookup.usages[17].add("legacy-value")
    check(validator(lookup), "legacy", [VALUE], batch([framed(17, ORDER)]))


@pytest.mark.parametrize(
    ("strategy", "topic", "subject"),
    [
        ("TopicNameStrategy", "orders", "orders-value"),
        ("RecordNameStrategy", "any", "shop.Order"),
        ("TopicRecordNameStrategy", "orders", "orders-shop.Order"),
    ],
)
def test_each_strategy_names_its_subject(lookup: FakeLookup, strategy: str, topic: str, subject: str) -> None:
    lookup.register(40, subject, AVRO)
    rule = FieldRule("value", strategy, payload=False)
    check(validator(lookup), topic, [rule], batch([framed(40, ORDER)]))
    other = FakeLookup()
    other.register(40, "elsewhere", AVRO)
    assert refusal(other, [rule], batch([framed(40, ORDER)]), topic) == (
        f"record 0: schema id 40 is not registered under subject {subject}"
    )


def test_record_names_of_each_format() -> None:
    assert record_name(AVRO, None) == "shop.Order"
    assert record_name(JSON, None) == "shop.Payment"
    assert record_name(PROTOBUF, "shop.Refund") == "shop.Refund"
    assert record_name(AVRO_KEY, None) is None
    assert subject_for("RecordNameStrategy", "t", "value", None) is None
    assert subject_for("TopicNameStrategy", "t", "key", None) == "t-key"


def test_record_name_strategy_needs_a_name(lookup: FakeLookup) -> None:
    rule = FieldRule("key", "RecordNameStrategy", payload=False)
    assert refusal(lookup, [rule], batch([b"v"], [framed(18, b"\x06abc")])) == (
        "record 0: schema id 18 (AVRO) has no record name for RecordNameStrategy"
    )
    untitled = FakeLookup()
    untitled.register(3, "x", jsonschema.FORMAT.parse(json.dumps({"type": "object"}), []))
    assert "has no title" in refusal(untitled, [rule._replace(field="value")], batch([framed(3, b"{}")]))


# --- rule 4: Protobuf message indexes -------------------------------------------------------------------


def test_protobuf_message_indexes_name_the_record(lookup: FakeLookup) -> None:
    lookup.register(50, "shop.Order", PROTOBUF)
    lookup.register(50, "shop.Order.Line", PROTOBUF)
    lookup.register(50, "shop.Refund", PROTOBUF)
    rule = FieldRule("value", "RecordNameStrategy", payload=False)
    v = validator(lookup)
    # [0] (one byte 0), [1], and the nested [0, 0]: three messages in one batch, each its own subject.
    values = [framed(50, b"", [0]), framed(50, b"", [1]), framed(50, b"", [0, 0]), framed(50, b"", [0])]
    tally = check(v, "t", [rule], batch(values))
    assert tally.counts == {("t", "value", "valid"): 4}
    # A map field's entry message is counted by the indexes but is no record: [0, 1] is Order.StockEntry.
    for bad, why in [
        ([2], "message index 2 at depth 0 is out of range: the file has 2 message(s)"),
        ([0, 1], "address a map entry (shop.Order.StockEntry)"),
        ([0, 0, 0], "message index 0 at depth 2 is out of range"),
    ]:
        message = refusal(lookup, [rule], batch([framed(50, b"", [0]), framed(50, b"", bad)]), "t")
        assert message.startswith("record 1: schema id 50: ")
        assert why in message


def test_protobuf_indexes_that_do_not_parse_fail_whatever_the_strategy(lookup: FakeLookup) -> None:
    lookup.register(50, "orders-value", PROTOBUF)
    # A count of 5 with one byte after it; a negative count.
    for raw in (b"\x0a\x00", b"\x01"):
        message = refusal(lookup, [VALUE], batch([b"\x00\x00\x00\x00\x32" + raw]))
        assert message == "record 0: schema id 50: the message indexes after the schema id do not parse"


def test_protobuf_indexes_in_the_guid_header(lookup: FakeLookup) -> None:
    guid = lookup.register(50, "shop.Refund", PROTOBUF)
    rule = FieldRule("value", "RecordNameStrategy", payload=True)
    payload = b"\x0a\x02o1"  # Refund{order_id: "o1"}
    check(validator(lookup), "t", [rule], batch([payload], headers={0: [guid_header("value", guid, [1])]}))
    missing = {0: [guid_header("value", guid)]}
    assert "message indexes: truncated varint" in refusal(
        lookup, [rule], batch([payload], headers=missing), "t"
    )


def test_an_avro_topic_that_turned_protobuf_is_measured_again(lookup: FakeLookup) -> None:
    """The first Protobuf batch of a topic is scanned again with its indexes measured; the next batches
    are measured from the start, and an Avro batch turns that off again."""
    lookup.register(50, "orders-value", PROTOBUF)
    v = validator(lookup)
    check(v, "orders", [VALUE], batch([framed(17, ORDER)]))
    assert ("orders", "value") not in v._indexed
    check(v, "orders", [VALUE], batch([framed(50, b"", [0]), framed(50, b"", [1])]))
    assert ("orders", "value") in v._indexed
    with pytest.raises(RecordRefused, match="record 1: schema id 50: message index 7"):
        check(v, "orders", [VALUE], batch([framed(50, b"", [0]), framed(50, b"", [7])]))
    check(v, "orders", [VALUE], batch([framed(17, ORDER)]))
    assert ("orders", "value") not in v._indexed


# --- rule 5: payload level ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema_id", "payload", "why"),
    [
        (17, ORDER + b"\x00", "1 bytes left after the Avro value"),
        (17, ORDER[:-2], "not an Avro value of the schema"),
        (60, b'{"amount": "ten"}', "'ten' is not of type 'integer'"),
        (60, b'{"amount": 1', "not JSON"),
        (60, b"[" * 100_000, "not JSON: maximum recursion depth"),
        (50, b"\x0a\x05ab", "not a shop.Order message"),
    ],
)
def test_payload_level_decodes_every_payload(
    lookup: FakeLookup, schema_id: int, payload: bytes, why: str
) -> None:
    lookup.register(50, "orders-value", PROTOBUF)
    lookup.register(60, "orders-value", JSON)
    rule = VALUE._replace(payload=True)
    good = {17: ORDER, 50: b"\x0a\x02o1", 60: b'{"amount": 10}'}[schema_id]
    indexes = [0] if schema_id == 50 else None
    v = validator(lookup)
    check(v, "orders", [rule], batch([framed(schema_id, good, indexes)] * 3))
    values = [framed(schema_id, good, indexes), framed(schema_id, payload, indexes)]
    with pytest.raises(RecordRefused) as caught:
        check(v, "orders", [rule], batch(values))
    assert caught.value.message.startswith(
        f"record 1: the value does not decode with schema id {schema_id}: "
    )
    assert why in caught.value.message
    # At id level the same bytes pass: only the framing and the registration are checked.
    check(v, "orders", [VALUE], batch(values))


def test_a_payload_that_recurses_past_the_stack_while_validated_fails(lookup: FakeLookup) -> None:
    # JSON parses at this depth; validating it against a schema that refers to itself recurses deeper.
    nested = jsonschema.FORMAT.parse(json.dumps({"type": "array", "items": {"$ref": "#"}}), [])
    lookup.register(61, "orders-value", nested)
    rule = VALUE._replace(payload=True)
    check(validator(lookup), "orders", [rule], batch([framed(61, b"[[[]]]")]))
    assert refusal(lookup, [rule], batch([framed(61, b"[" * 900 + b"]" * 900)])) == (
        "record 0: the value does not decode with schema id 61: the payload nests too deeply to decode"
    )


def test_the_payload_of_a_compressed_batch_is_checked_after_decompression(lookup: FakeLookup) -> None:
    rule = VALUE._replace(payload=True)
    values = [framed(17, avro_bytes({"id": i, "item": "x" * i})) for i in range(50)]
    check(validator(lookup), "orders", [rule], batch(values, codec=compression.ZSTD))
    values[30] += b"!"
    message = refusal(lookup, [rule], batch(values, codec=compression.GZIP))
    assert (
        message == "record 30: the value does not decode with schema id 17: 1 bytes left after the Avro value"
    )


# --- which record, and the two fields -------------------------------------------------------------------


def test_the_first_failing_record_is_named_across_runs_and_fields(lookup: FakeLookup) -> None:
    values = [framed(17, ORDER)] * 2 + [framed(99, ORDER)] + [b"\x07"]
    keys: list[bytes | None] = [framed(18, b"\x02a")] * 3 + [b"plain"]
    assert refusal(lookup, [KEY, VALUE], batch(values, keys)).startswith("record 2: schema id 99")
    keys[1] = b"no"
    assert refusal(lookup, [KEY, VALUE], batch(values, keys)).startswith("record 1: the key is 2 bytes")


def test_rules_follow_the_topic_config() -> None:
    assert rules_of(TopicConfig.from_overrides({})) == ()
    config = TopicConfig.from_overrides(
        {
            "confluent.value.schema.validation": "true",
            "redpanda.key.schema.id.validation": "true",
            "redpanda.key.subject.name.strategy": "io.confluent.kafka.serializers.subject.RecordNameStrategy",
            "strata.value.schema.validation.level": "payload",
        }
    )
    assert rules_of(config) == (
        FieldRule("key", "RecordNameStrategy", payload=False),
        FieldRule("value", "TopicNameStrategy", payload=True),
    )


def test_one_schema_per_batch_costs_one_lookup_of_each_kind(lookup: FakeLookup) -> None:
    v = validator(lookup)
    check(v, "orders", [VALUE], batch([framed(17, avro_bytes({"id": i, "item": "t"})) for i in range(500)]))
    assert lookup.reads == {"schema": 1, "subjects": 1}
    check(v, "orders", [VALUE], batch([framed(17, ORDER)] * 100))
    assert lookup.reads == {"schema": 1, "subjects": 1}


def test_an_id_past_2_31_is_an_unknown_id(lookup: FakeLookup) -> None:
    assert refusal(lookup, [VALUE], batch([b"\x00\xff\xff\xff\xff" + ORDER])) == (
        "record 0: schema id 4294967295 is not registered"
    )


RECURSIVE_AVSC = json.dumps(
    {
        "type": "record",
        "name": "Node",
        "fields": [
            {"name": "label", "type": ["null", "string", "bytes", {"type": "map", "values": "double"}]},
            {"name": "children", "type": {"type": "array", "items": "Node"}},
        ],
    }
)


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from([17, 50, 60, 70]), st.binary(max_size=64), st.booleans())
def test_random_payloads_pass_or_are_refused_and_nothing_else(
    schema_id: int, payload: bytes, prefixed: bool
) -> None:
    """Bad client bytes end in RecordRefused, whatever the format's library raised on them."""
    lookup = FakeLookup()
    lookup.register(17, "t-value", AVRO)
    lookup.register(50, "t-value", PROTOBUF)
    lookup.register(60, "t-value", JSON)
    lookup.register(70, "t-value", avro.FORMAT.parse(RECURSIVE_AVSC, []))
    value = (b"\x00" + schema_id.to_bytes(4, "big") + payload) if prefixed else payload
    refused = None
    try:
        check(validator(lookup), "t", [VALUE._replace(payload=True)], batch([value]))
    except RecordRefused as exc:
        refused = exc.message
    assert refused is None or refused.startswith("record 0: ")
