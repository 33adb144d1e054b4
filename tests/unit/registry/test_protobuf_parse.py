"""Protobuf schemas parsed: .proto text and base64 descriptors, references and built-in imports, the
canonical form, and every way a schema is refused (InvalidSchema, never another exception)."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry.errors import InvalidSchema
from registry.formats.base import Resolved, SchemaType
from registry.formats.protobuf import FORMAT, ProtobufSchema
from registry.formats.protobuf_builtins import SHIPPED
from registry.formats.protobuf_compile import compile_proto
from registry.formats.protobuf_normalize import normalize
from tests.examples import examples

FAST = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])

ORDER = """syntax = "proto3";
package shop;

import "google/protobuf/timestamp.proto";

// An order, as a shop writes it.
message Order {
  string id = 1;
  map<string, int32> stock = 2;
  message Line {
    int32 qty = 1;
    message Note {
      string text = 1;
    }
  }
  repeated Line lines = 3;
  google.protobuf.Timestamp placed_at = 4;
}

message Refund {
  string order_id = 1;
}
"""


def ref(name: str, text: str) -> Resolved:
    return Resolved(name, SchemaType.PROTOBUF, text)


def b64(file: descriptor_pb2.FileDescriptorProto) -> str:
    return base64.b64encode(file.SerializeToString()).decode()


def test_text_is_kept_and_compiled() -> None:
    schema = FORMAT.parse(ORDER, [])
    assert schema.schema_type is SchemaType.PROTOBUF
    assert schema.text == ORDER
    assert schema.file.package == "shop"
    assert [file.name for file in schema.files] == ["google/protobuf/timestamp.proto", "default.proto"]


def test_record_names_in_message_index_order_without_map_entries() -> None:
    schema = FORMAT.parse(ORDER, [])
    assert schema.record_names() == ["shop.Order", "shop.Order.Line", "shop.Order.Line.Note", "shop.Refund"]
    assert schema.message_indexes("shop.Order.Line.Note") == [0, 1, 0]
    assert schema.message_name([1]) == "shop.Refund"


def test_descriptor_in_text_out() -> None:
    """What confluent-kafka registers (base64 of the generated module's serialized_pb) parses, prints as
    text, and answers format=serialized with the same descriptor."""
    text_form = FORMAT.parse(ORDER, [])
    sent = text_form.file.SerializeToString()
    schema = FORMAT.parse(base64.b64encode(sent).decode(), [])
    assert schema.file == text_form.file
    assert "message Order {" in schema.text
    assert "map<string, int32> stock = 2;" in schema.text
    assert base64.b64decode(schema.serialized()) == text_form.file.SerializeToString(deterministic=True)
    assert schema.canonical() == text_form.canonical()
    reparsed = FORMAT.parse(schema.text, [])
    assert normalize(reparsed.file) == normalize(schema.file)


def test_canonical_ignores_order_spelling_and_comments() -> None:
    one = FORMAT.parse(
        'syntax = "proto3";\npackage p;\nimport "b.proto";\nimport "a.proto";\n'
        'message M {\n  int32 y = 2;\n  // x\n  int32 x = 1 [json_name = "x"];\n'
        "  enum E { Z = 0; B = 2; A = 1; }\n}\n",
        [
            ref("a.proto", 'syntax = "proto3";\nmessage A {}\n'),
            ref("b.proto", 'syntax = "proto3";\nmessage B {}\n'),
        ],
    )
    two = FORMAT.parse(
        'syntax = "proto3"; package p; import "a.proto"; import "b.proto";\n'
        "message M { int32 x = 1; int32 y = 2; enum E { Z = 0; A = 1; B = 2; } }",
        [
            ref("a.proto", 'syntax = "proto3";\nmessage A {}\n'),
            ref("b.proto", 'syntax = "proto3";\nmessage B {}\n'),
        ],
    )
    assert one.canonical() == two.canonical()
    assert one.text != two.text
    assert 'import "a.proto";\nimport "b.proto";' in one.canonical()


def test_canonical_tells_schemas_apart_and_is_a_fixed_point() -> None:
    schema = FORMAT.parse(ORDER, [])
    other = FORMAT.parse(ORDER.replace("int32 qty = 1;", "int64 qty = 1;"), [])
    assert schema.canonical() != other.canonical()
    again = FORMAT.parse(schema.canonical(), [])
    assert again.canonical() == schema.canonical()


def test_canonical_text_orders_options_by_name() -> None:
    """As Confluent prints a normalized schema (Karapace's test_normalized_schema_idempotence_produce_and_
    fetch): options by name, a custom option by its full name; the registered text and the descriptor
    registered as base64 keep theirs."""
    options = [
        'option java_package = "com.example";',
        "option java_multiple_files = true;",
        'option (confluent.file_meta) = { doc: "d" };',
        'option java_outer_classname = "FredProto";',
    ]
    text = (
        'syntax = "proto3";\npackage tc4;\nimport "confluent/meta.proto";\n\n{}\n\nmessage Foo {{\n{}\n}}\n'
    )
    message = (
        '  option deprecated = true;\n  option (confluent.message_meta) = { doc: "m" };\n  string code = 1;'
    )
    schema = FORMAT.parse(text.format("\n".join(options), message), [])
    assert schema.canonical() == (
        'syntax = "proto3";\npackage tc4;\n\nimport "confluent/meta.proto";\n\n'
        'option (.confluent.file_meta) = { doc: "d" };\noption java_multiple_files = true;\n'
        'option java_outer_classname = "FredProto";\noption java_package = "com.example";\n\n'
        'message Foo {\n  option (.confluent.message_meta) = { doc: "m" };\n  option deprecated = true;\n'
        "  string code = 1;\n}\n"
    )
    assert (
        FORMAT.parse(text.format("\n".join(reversed(options)), message), []).canonical() == schema.canonical()
    )
    assert schema.text.index("java_package") < schema.text.index("java_multiple_files")
    described = FORMAT.parse(schema.serialized(), [])
    assert described.text.index("java_package") < described.text.index("java_outer_classname")
    assert FORMAT.parse(schema.canonical(), []).file == schema.file


def test_text_references_in_dependency_order() -> None:
    money = 'syntax = "proto3";\npackage common;\nmessage Money {\n  int64 units = 1;\n}\n'
    price = (
        'syntax = "proto3";\npackage common;\nimport "common/money.proto";\n'
        "message Price {\n  Money m = 1;\n}\n"
    )
    schema = FORMAT.parse(
        'syntax = "proto3";\nimport "common/price.proto";\nmessage Item {\n  common.Price price = 1;\n}\n',
        [ref("common/money.proto", money), ref("common/price.proto", price)],
    )
    assert [file.name for file in schema.files] == [
        "common/money.proto",
        "common/price.proto",
        "default.proto",
    ]


def test_descriptor_references_and_descriptor_schema() -> None:
    """confluent-kafka registers the references as base64 descriptors too, named by import path."""
    money = compile_proto(
        "money.proto", {"money.proto": 'syntax = "proto3";\nmessage Money { int64 u = 1; }\n'}
    )
    named_elsewhere = descriptor_pb2.FileDescriptorProto()
    named_elsewhere.CopyFrom(money)
    named_elsewhere.name = "something/else.proto"
    item = compile_proto(
        "item.proto",
        {"money.proto": "syntax = 'proto3'; message Money { int64 u = 1; }",
         "item.proto": 'syntax = "proto3";\nimport "money.proto";\nmessage Item { Money m = 1; }\n'},
    )  # fmt: skip
    schema = FORMAT.parse(b64(item), [ref("money.proto", b64(named_elsewhere))])
    assert [file.name for file in schema.files] == ["money.proto", "item.proto"]
    # A text schema can import a reference registered as a descriptor (printed for protoc).
    text = FORMAT.parse('syntax = "proto3";\nimport "money.proto";\nmessage X { Money m = 1; }\n',
                        [ref("money.proto", b64(named_elsewhere))])  # fmt: skip
    assert text.files[0] == schema.files[0]


@pytest.mark.parametrize(
    "imported",
    ["google/protobuf/timestamp.proto", "google/protobuf/struct.proto", "google/type/date.proto",
     "google/type/money.proto", "confluent/meta.proto", "confluent/type/decimal.proto"],
)  # fmt: skip
def test_builtins_resolve_without_references(imported: str) -> None:
    schema = FORMAT.parse(f'syntax = "proto3";\nimport "{imported}";\nmessage M {{}}\n', [])
    assert imported in [file.name for file in schema.files]
    described = FORMAT.parse(schema.serialized(), [])
    assert [file.name for file in described.files] == [file.name for file in schema.files]


def test_confluent_field_meta_option() -> None:
    schema = FORMAT.parse(
        'syntax = "proto3";\nimport "confluent/meta.proto";\n'
        "message User {\n  string ssn = 1 [(confluent.field_meta) = "
        '{ tags: "PII" params: { key: "k" value: "v" } }];\n}\n',
        [],
    )
    assert '(.confluent.field_meta) = { params { key: "k" value: "v" } tags: "PII" }' in schema.canonical()


def test_shipped_confluent_files_match_confluent_kafka() -> None:
    from confluent_kafka.schema_registry.confluent import meta_pb2
    from confluent_kafka.schema_registry.confluent.type import decimal_pb2, variant_pb2
    from confluent_kafka.schema_registry.confluent.types import decimal_pb2 as legacy_decimal_pb2

    modules = (meta_pb2, decimal_pb2, variant_pb2, legacy_decimal_pb2)
    assert sorted(str(p.relative_to(SHIPPED)) for p in SHIPPED.rglob("*.proto")) == sorted(
        module.DESCRIPTOR.name for module in modules
    )
    for module in modules:
        theirs = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
        ours = compile_proto(theirs.name, {})
        assert normalize(ours) == normalize(theirs), theirs.name


def test_own_file_name_avoids_reference_names() -> None:
    """The schema's own file is default.proto, unless a reference has that name; a descriptor keeps its
    own name unless a reference has it."""
    taken = [ref("default.proto", 'syntax = "proto3";\nmessage D {}\n')]
    text = FORMAT.parse('syntax = "proto3";\nimport "default.proto";\nmessage M { D d = 1; }\n', taken)
    assert [file.name for file in text.files] == ["default.proto", "default_1.proto"]
    clash = descriptor_pb2.FileDescriptorProto(name="default.proto", syntax="proto3")
    clash.message_type.add(name="M")
    assert FORMAT.parse(b64(clash), taken).file.name == "default_1.proto"


def test_reference_wins_over_a_builtin_of_the_same_name() -> None:
    fake = 'syntax = "proto3";\npackage google.protobuf;\nmessage Timestamp {\n  string iso = 1;\n}\n'
    schema = FORMAT.parse(
        'syntax = "proto3";\nimport "google/protobuf/timestamp.proto";\n'
        "message M { google.protobuf.Timestamp t = 1; }\n",
        [ref("google/protobuf/timestamp.proto", fake)],
    )
    assert schema.files[0].message_type[0].field[0].name == "iso"


@pytest.mark.parametrize(
    ("text", "references", "expected"),
    [
        ("", [], "empty schema"),
        (
            'syntax = "proto3";\nmessage M {\n  Missing m = 1;\n}\n',
            [],
            'default.proto:3:3: "Missing" is not defined.',
        ),
        ('syntax = "proto3";\nmessage M { int32 a = 1 }\n', [], "default.proto:2:25: Expected"),
        ('syntax = "proto3";\nimport "nowhere.proto";\n', [], "nowhere.proto: File not found."),
        ('syntax = "proto3";\nmessage M {}', [ref("../escape.proto", "")], "invalid import path"),
        ('syntax = "proto3";\nmessage M {}', [ref("/abs.proto", "")], "invalid import path"),
        ('syntax = "proto3";\nmessage M {}', [Resolved("a.avsc", SchemaType.AVRO, "{}")], "is a AVRO schema"),
        ("AAEC", [], "not a serialized FileDescriptorProto"),
    ],
)
def test_invalid_schemas(text: str, references: list[Resolved], expected: str) -> None:
    with pytest.raises(InvalidSchema) as caught:
        FORMAT.parse(text, references)
    assert expected in caught.value.message
    assert caught.value.code == 42201


def test_invalid_descriptors() -> None:
    unresolved = descriptor_pb2.FileDescriptorProto(name="m.proto", package="p", syntax="proto3")
    message = unresolved.message_type.add(name="M")
    message.field.add(name="x", number=1, type=11, type_name=".p.Nope", label=1)
    with pytest.raises(InvalidSchema, match="Nope"):
        FORMAT.parse(b64(unresolved), [])
    missing = descriptor_pb2.FileDescriptorProto(name="m.proto", dependency=["other.proto"])
    with pytest.raises(InvalidSchema, match=r'import "other\.proto" is neither a reference nor a built-in'):
        FORMAT.parse(b64(missing), [])
    duplicate = descriptor_pb2.FileDescriptorProto(name="m.proto", syntax="proto3")
    message = duplicate.message_type.add(name="M")
    message.field.add(name="x", number=1, type=5, label=1)
    message.field.add(name="y", number=1, type=5, label=1)
    with pytest.raises(InvalidSchema):
        FORMAT.parse(b64(duplicate), [])


def test_import_cycle_through_a_reference_given_twice() -> None:
    """References come in dependency order, so only a name given twice (the last one wins, as in
    Confluent) can close a cycle; it is refused, not followed."""
    a1 = descriptor_pb2.FileDescriptorProto(name="a.proto")
    b = descriptor_pb2.FileDescriptorProto(name="b.proto", dependency=["a.proto"])
    a2 = descriptor_pb2.FileDescriptorProto(name="a.proto", dependency=["b.proto"])
    main = descriptor_pb2.FileDescriptorProto(name="m.proto", dependency=["a.proto"])
    with pytest.raises(InvalidSchema, match=r"import cycle: a.proto -> b.proto -> a.proto"):
        FORMAT.parse(b64(main), [ref("a.proto", b64(a1)), ref("b.proto", b64(b)), ref("a.proto", b64(a2))])


def test_option_no_import_defines_is_refused() -> None:
    file = descriptor_pb2.FileDescriptorProto(name="m.proto", syntax="proto3")
    field = file.message_type.add(name="M").field.add(name="x", number=1, type=5, label=1)
    field.options.MergeFromString(b"\x80\xb5\x18\x01")  # field 50000, varint 1: an undefined extension
    with pytest.raises(InvalidSchema, match=r"sets field\(s\) \[50000\]"):
        FORMAT.parse(b64(file), [])


def test_parsed_schemas_have_private_pools() -> None:
    """Two versions of one file (same name, different content) coexist: each schema has its own pool."""
    one = FORMAT.parse('syntax = "proto3";\npackage p;\nmessage M { int32 a = 1; }\n', [])
    two = FORMAT.parse('syntax = "proto3";\npackage p;\nmessage M { string a = 1; }\n', [])
    assert (
        one.pool.FindMessageTypeByName("p.M").fields[0].type
        != two.pool.FindMessageTypeByName("p.M").fields[0].type
    )


@FAST
@given(st.text(max_size=200))
def test_any_text_parses_or_is_invalid(text: str) -> None:
    try:
        schema = FORMAT.parse(text, [])
    except InvalidSchema:
        return
    assert isinstance(schema, ProtobufSchema)


@FAST
@given(st.binary(max_size=200))
def test_any_descriptor_bytes_parse_or_are_invalid(blob: bytes) -> None:
    try:
        schema = FORMAT.parse(base64.b64encode(blob).decode() or "AA==", [])
    except InvalidSchema:
        return
    assert isinstance(schema, ProtobufSchema)
