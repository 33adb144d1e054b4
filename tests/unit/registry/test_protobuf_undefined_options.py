"""Custom options that no import defines (registry/formats/protobuf_undefined.py): accepted at every
position, out of the descriptor, in the canonical text; defined options and other errors as before."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2
from hypothesis import example, given, settings
from hypothesis import strategies as st

from registry.errors import InvalidSchema
from registry.formats.base import Resolved, SchemaType
from registry.formats.protobuf import FORMAT
from registry.formats.protobuf_option_scan import Scan, ScanError, UndefinedOption
from tests.examples import examples

P3 = 'syntax = "proto3";\npackage p;\n'
P2 = 'syntax = "proto2";\npackage p;\n'
# (position, the schema with @ where the option goes, the option, the option kept, its canonical line)
POSITIONS = [
    (
        "file",
        P3 + "@message Foo { string a = 1; }\n",
        "option (my_option) = true;\n",
        UndefinedOption("file", "", "(my_option)", "true"),
        "option (my_option) = true;",
    ),
    (
        "message",
        P3 + "message Foo {\n  @string a = 1;\n}\n",
        "option (msg_opt) = 7;\n  ",
        UndefinedOption("message", ".p.Foo", "(msg_opt)", "7"),
        "  option (msg_opt) = 7;",
    ),
    (
        "field",
        P3 + "message Foo { string a = 1@; }\n",
        ' [(field_opt) = "x"]',
        UndefinedOption("field", ".p.Foo.a", "(field_opt)", '"x"'),
        '  string a = 1 [(field_opt) = "x"];',
    ),
    (
        "oneof",
        P3 + "message Foo {\n  oneof page_info {\n    @int32 page_number = 3;\n  }\n}\n",
        "option (my_option) = true;\n    ",
        UndefinedOption("oneof", ".p.Foo.page_info", "(my_option)", "true"),
        "    option (my_option) = true;",
    ),
    (
        "enum",
        P3 + "enum Kind {\n  @NONE = 0;\n}\n",
        "option (enum_opt) = -3;\n  ",
        UndefinedOption("enum", ".p.Kind", "(enum_opt)", "-3"),
        "  option (enum_opt) = -3;",
    ),
    (
        "enum value",
        P3 + "message Foo {\n  enum Kind { NONE = 0@; }\n}\n",
        " [(value_opt) = 1.50]",
        UndefinedOption("enum_value", ".p.Foo.Kind.NONE", "(value_opt)", "1.5"),
        "    NONE = 0 [(value_opt) = 1.5];",
    ),
    (
        "service",
        P3 + "message Foo {}\nservice Svc {\n  @rpc Get(Foo) returns (Foo);\n}\n",
        'option (svc_opt) = "s";\n  ',
        UndefinedOption("service", ".p.Svc", "(svc_opt)", '"s"'),
        '  option (svc_opt) = "s";',
    ),
    (
        "method",
        P3 + "message Foo {}\nservice Svc {\n  rpc Get(Foo) returns (Foo) {@}\n}\n",
        " option (http).get = '/foo'; ",
        UndefinedOption("method", ".p.Svc.Get", "(http).get", '"/foo"'),
        '    option (http).get = "/foo";',
    ),
    (
        "extension range",
        P2 + "message Foo {\n  extensions 100 to 199@;\n}\n",
        " [(range_opt) = { a: 1 }]",
        UndefinedOption("extension_range", ".p.Foo:100", "(range_opt)", "{ a: 1 }"),
        "  extensions 100 to 199 [(range_opt) = { a: 1 }];",
    ),
    (
        "group field",
        P2 + "message Foo {\n  optional group Item = 1@ {\n    optional int32 n = 1;\n  }\n}\n",
        " [(group_opt) = 2]",
        UndefinedOption("field", ".p.Foo.item", "(group_opt)", "2"),
        "  optional group Item = 1 [(group_opt) = 2] {",
    ),
    (
        "extension field",
        P2 + "message Foo { extensions 10 to 20; }\nextend Foo { optional int32 more = 10@; }\n",
        " [(ext_opt) = 0x10]",
        UndefinedOption("field", ".p.more", "(ext_opt)", "16"),
        "  optional int32 more = 10 [(ext_opt) = 16];",
    ),
]


@pytest.mark.parametrize(
    ("template", "option", "kept", "line"),
    [case[1:] for case in POSITIONS],
    ids=[case[0] for case in POSITIONS],
)
def test_an_undefined_option_is_kept_beside_the_descriptor(
    template: str, option: str, kept: UndefinedOption, line: str
) -> None:
    text = template.replace("@", option)
    schema = FORMAT.parse(text, [])
    assert schema.text == text
    assert schema.undefined_options == (kept,)
    # The descriptor is the one of the text without the option: format=serialized has none of it.
    assert schema.file == FORMAT.parse(template.replace("@", ""), []).file
    served = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.serialized()))
    assert served == schema.file
    # The canonical text prints it where it was, and reads back to itself.
    assert line in schema.canonical().splitlines()
    again = FORMAT.parse(schema.canonical(), [])
    assert again.canonical() == schema.canonical()
    assert again.undefined_options == (kept,)


def test_the_canonical_text_tells_values_apart_and_not_spellings() -> None:
    base = 'syntax = "proto3";\nmessage Foo {{ string a = 1 [{}]; }}\n'
    one = FORMAT.parse(base.format('(opt) = "a" "b", deprecated = true'), [])
    spelled = FORMAT.parse(base.format("deprecated=true,( opt )='ab'"), [])
    other = FORMAT.parse(base.format('(opt) = "ac", deprecated = true'), [])
    assert one.canonical() == spelled.canonical()
    assert one.canonical() != other.canonical()
    # Options differ in no descriptor, so the schemas are compatible both ways, as in Confluent.
    assert one.file == other.file
    assert FORMAT.compatibility(one, other) == []
    assert FORMAT.compatibility(other, one) == []


def test_defined_and_undefined_options_side_by_side() -> None:
    text = """syntax = "proto3";
package p;
import "google/protobuf/descriptor.proto";
extend google.protobuf.FieldOptions { string known = 50001; }
message Foo {
  string a = 1 [(zz_unknown) = "u", (known) = "k", (aa_unknown) = 3];
}
"""
    schema = FORMAT.parse(text, [])
    assert [option.name for option in schema.undefined_options] == ["(zz_unknown)", "(aa_unknown)"]
    options = schema.file.message_type[0].field[0].options
    known = schema.pool.FindExtensionByName("p.known")
    readable = schema.pool.FindMessageTypeByName("google.protobuf.FieldOptions")
    assert known.number == 50001
    assert readable is not None
    assert options.SerializeToString() == b"\x8a\xb5\x18\x01k"  # field 50001, "k": the defined one only
    # Sorted by name among each other: (aa_unknown), (.p.known) as p.known, (zz_unknown).
    assert '  string a = 1 [(aa_unknown) = 3, (.p.known) = "k", (zz_unknown) = "u"];' in schema.canonical()


def test_a_misused_defined_option_is_still_refused() -> None:
    text = """syntax = "proto3";
import "google/protobuf/descriptor.proto";
extend google.protobuf.FieldOptions { string only_fields = 50001; }
option (only_fields) = "x";
"""
    with pytest.raises(InvalidSchema, match=r"not a field or extension of message"):
        FORMAT.parse(text, [])


def test_other_errors_point_into_the_text_as_registered() -> None:
    text = (
        'syntax = "proto3";\noption (a) = 1;\nmessage Foo {\n\tstring s = 1 [(b) = "é"];\tMissing m = 2;\n}\n'
    )
    with pytest.raises(InvalidSchema) as raised:
        FORMAT.parse(text, [])
    # protoc's columns: the tab moves to 8, "é" is two bytes; the error is the type, not the options.
    assert raised.value.message == 'default.proto:4:41: "Missing" is not defined.'


def test_columns_after_tabs_and_multibyte_text_find_the_option() -> None:
    text = (
        'syntax = "proto3";\nmessage Foo {\n'
        '\tstring s = 1 [json_name = "ß", (b) = "é"];\tstring t = 2 [(c) = 1];\n}\n'
    )
    schema = FORMAT.parse(text, [])
    assert [o.scope for o in schema.undefined_options] == [".Foo.s", ".Foo.t"]
    assert schema.file.message_type[0].field[0].json_name == "ß"


def test_undefined_options_of_a_reference_stay_in_the_reference() -> None:
    customer = (
        'syntax = "proto3";\npackage a1;\noption (file_opt) = 1;\n'
        "message Customer { string name = 1 [(f) = 2]; }\n"
    )
    importer = """syntax = "proto3";
package a1;
import "Customer.proto";
message TestMessage {
  Customer customer = 1;
  oneof page_info {
    option (my_option) = true;
    int32 page_number = 3;
  }
}
"""
    schema = FORMAT.parse(importer, [Resolved("Customer.proto", SchemaType.PROTOBUF, customer)])
    assert schema.undefined_options == (
        UndefinedOption("oneof", ".a1.TestMessage.page_info", "(my_option)", "true"),
    )
    assert "file_opt" not in schema.canonical()
    assert "(f)" not in schema.canonical()
    assert schema.files[0].name == "Customer.proto"


def test_a_bracket_list_keeps_its_commas_between_what_remains() -> None:
    text = "message M { optional int32 a = 1 [(x) = 1, deprecated = true, (y) = { b: [1, 2] }, packed = 0]; }"
    scan = Scan(text)
    assert [site.options[0].name for site in scan.sites] == ["(x)", "(y)"]
    removed = scan.removal([0, 1])
    assert len(removed) == len(text)
    assert " ".join(removed.split()) == "message M { optional int32 a = 1 [ deprecated = true, packed = 0]; }"
    assert " ".join(scan.removal([1]).split()) == (
        "message M { optional int32 a = 1 [(x) = 1, deprecated = true, packed = 0]; }"
    )
    only = Scan("message M { optional int32 a = 1 [(x) = 1]; }")
    assert " ".join(only.removal([0]).split()) == "message M { optional int32 a = 1 ; }"


PIECES = st.sampled_from(
    [
        "option",
        "(",
        ")",
        "x",
        "=",
        ";",
        "{",
        "}",
        "[",
        "]",
        ",",
        "message",
        "M",
        "enum",
        "oneof",
        "rpc",
        "service",
        "1",
        "09",
        "-",
        '"s',
        '"s"',
        "'\\x'",
        '"\\u12"',
        "0x",
        "1.5e",
        "group",
        "extend",
        "extensions",
        "to",
        "/*",
        "//",
        "\n",
        "\t",
        "é",
        " ",
    ]
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(PIECES, max_size=40).map(" ".join))
@example("option (x) = '\\x';")  # a truncated escape
@example('message M { int32 a = 1 [(x) = "\\u12"]; }')
@example("option (x) = 09;")
def test_the_scan_of_any_text_ends_or_raises_scan_error(text: str) -> None:
    """The scan only ever runs on text protoc parsed, but must never fail otherwise than by ScanError."""
    try:
        scan = Scan(text)
    except ScanError:
        return
    removed = scan.removal(range(len(scan.sites)))
    assert len(removed.encode()) == len(text.encode())
