"""The descriptor printer: printed text recompiles to the same descriptor, for a corpus covering proto2,
proto3 and editions, and for every built-in file (descriptor.proto included)."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pb2

from registry.formats import protobuf_builtins
from registry.formats.base import Resolved, SchemaType
from registry.formats.protobuf import FORMAT
from registry.formats.protobuf_compile import builtin_descriptor, compile_proto
from registry.formats.protobuf_normalize import normalize
from registry.formats.protobuf_print import print_file
from registry.formats.protobuf_resolve import Resolver, build_pool

COMMON = """syntax = "proto3";
package acme.common;
option java_package = "com.acme.common";
message Money {
  string currency = 1;
  int64 units = 2;
}
enum Level { LEVEL_UNSPECIFIED = 0; HIGH = 1; }
"""

CORPUS = {
    "proto3": """syntax = "proto3";
package acme.shop.v1;

import "google/protobuf/timestamp.proto";
import public "acme/common.proto";
import "confluent/meta.proto";

option java_multiple_files = true;
option go_package = "acme/shop;shop";
option (confluent.file_meta) = { doc: "orders" };

message Order {
  option deprecated = true;
  option (confluent.message_meta).tags = "PII";
  string id = 1 [json_name = "orderId", deprecated = true];
  repeated int32 codes = 2 [packed = false];
  map<string, acme.common.Money> prices = 3;
  map<int64, Order.Line> lines = 4;
  optional string note = 5;
  oneof payment {
    string card = 6 [(confluent.field_meta) = { doc: "card", tags: ["PII", "PCI"] }];
    bytes token = 7;
  }
  google.protobuf.Timestamp placed_at = 8;
  acme.common.Level level = 9;
  Status status = 10;
  message Line {
    uint32 qty = 1;
    sint64 delta = 2;
    fixed32 f32 = 3;
    sfixed64 sf64 = 4;
    double price = 5;
    float weight = 6;
    bool gift = 7;
    message Empty {}
  }
  enum Status {
    option allow_alias = true;
    STATUS_UNSPECIFIED = 0;
    OPEN = 1;
    STARTED = 1 [deprecated = true];
    CLOSED = 2 [(confluent.enum_value_meta) = { doc: "done" }];
    reserved 5, 9 to 11, 100 to max;
    reserved "OLD";
  }
  reserved 20, 30 to 40, 1000 to max;
  reserved "legacy", "older";
}

service Shop {
  option deprecated = true;
  rpc Place(Order) returns (Order);
  rpc Watch(stream Order) returns (stream Order.Line) {
    option idempotency_level = NO_SIDE_EFFECTS;
  }
}
""",
    "proto2": r"""syntax = "proto2";
package legacy;

message Record {
  required string key = 1 [default = "a\"b\\c\n\001é"];
  optional bytes blob = 2 [default = "\000\377x"];
  optional double ratio = 3 [default = -inf];
  optional float scale = 4 [default = 1.5];
  optional Kind kind = 5 [default = KIND_B];
  optional int64 big = 6 [default = -9223372036854775808];
  optional bool flag = 7 [default = true];
  repeated int32 packed_ints = 8 [packed = true];
  optional group Detail = 9 {
    optional string text = 1;
    repeated group Item = 2 {
      optional int32 n = 1;
    }
  }
  enum Kind { KIND_A = 1; KIND_B = 2; }
  extensions 100 to 199, 500;
  extensions 1000 to max;
  oneof choice {
    string name = 10;
    int32 number = 11;
  }
  extend Record {
    optional string nested_ext = 150;
  }
}

extend Record {
  optional int32 ext_number = 100;
  repeated string ext_tags = 101;
}

message Holder { optional Record r = 1; }
""",
    "editions": """edition = "2023";
package modern;

option features.field_presence = IMPLICIT;
option features.enum_type = CLOSED;

message Doc {
  int32 id = 1 [features.field_presence = LEGACY_REQUIRED];
  Part part = 2 [features.message_encoding = DELIMITED];
  repeated int32 nums = 3 [features.repeated_field_encoding = EXPANDED];
  string title = 4 [features.field_presence = EXPLICIT];
  reserved nope, gone;
  reserved 10 to 12;
}

message Part { string text = 1; }
enum Color { RED = 1; BLUE = 2; }
""",
    "no package, nested names": """syntax = "proto3";
message A {
  message B {
    message C { A a = 1; B b = 2; }
    C c = 1;
  }
  B.C deep = 1;
  .A.B.C absolute = 2;
}
""",
    "custom options declared here": """syntax = "proto2";
package opts;
import "google/protobuf/descriptor.proto";
message Rule { optional string expr = 1; repeated int32 codes = 2; optional Rule next = 3; }
extend google.protobuf.FieldOptions {
  optional Rule rule = 50001;
  repeated string labels = 50002;
  optional double weight = 50003;
  optional bytes raw = 50004;
  optional Mode mode = 50005;
}
extend google.protobuf.FileOptions { optional string owner = 50010; }
extend google.protobuf.OneofOptions { optional string oneof_tag = 50020; }
enum Mode { MODE_A = 0; MODE_B = 1; }
option (owner) = "team\\"a\\"";
message Thing {
  optional string x = 1 [(rule) = { expr: "x > 0" codes: [1, 2] next { expr: "y" } },
                         (labels) = "a", (labels) = "b", (weight) = 0.1, (raw) = "\\001z", (mode) = MODE_B];
  oneof pick {
    option (oneof_tag) = "p";
    string left = 2;
    string right = 3;
  }
}
""",
}


def compiled(name: str) -> list[descriptor_pb2.FileDescriptorProto]:
    """The corpus schema's file after its imports (``acme/common.proto`` a reference)."""
    return list(
        FORMAT.parse(CORPUS[name], [Resolved("acme/common.proto", SchemaType.PROTOBUF, COMMON)]).files
    )


def roundtrip(name: str, files: list[descriptor_pb2.FileDescriptorProto]) -> None:
    """Print ``files[-1]`` and compile the text again, its imports printed too: same descriptor."""
    pool = build_pool(files)
    sources = {file.name: print_file(file, pool) for file in files}
    again = compile_proto(files[-1].name, sources)
    assert again == files[-1], f"{name}:\n{sources[files[-1].name]}"


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_round_trips(name: str) -> None:
    roundtrip(name, compiled(name))


def _builtin_names() -> list[str]:
    names = [
        str(path.relative_to(root))
        for root in protobuf_builtins.include_roots()
        for path in sorted(root.rglob("*.proto"))
    ]
    return sorted({*names, *protobuf_builtins.google_type_files()})


@pytest.mark.parametrize("name", _builtin_names())
def test_builtin_files_round_trip(name: str) -> None:
    builtin = builtin_descriptor(name)
    assert builtin is not None
    roundtrip(name, Resolver([]).ordered(builtin))


def test_output_shape() -> None:
    files = compiled("proto3")
    text = print_file(files[-1], build_pool(files))
    assert text.startswith(
        'syntax = "proto3";\npackage acme.shop.v1;\n\nimport "google/protobuf/timestamp.proto";'
    )
    assert 'import public "acme/common.proto";' in text
    assert "  map<string, .acme.common.Money> prices = 3;\n" in text
    assert '  string id = 1 [json_name = "orderId", deprecated = true];\n' in text
    assert "  optional string note = 5;\n" in text
    assert "  oneof payment {\n" in text
    assert "PricesEntry" not in text
    assert "  rpc Watch(stream .acme.shop.v1.Order) returns (stream .acme.shop.v1.Order.Line) {\n" in text


def test_without_a_pool_standard_options_print() -> None:
    file = compile_proto(
        "m.proto", {"m.proto": 'syntax = "proto3";\nmessage M { repeated int32 a = 1 [packed = false]; }'}
    )
    assert "repeated int32 a = 1 [packed = false];" in print_file(file)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_canonical_is_a_fixed_point(name: str) -> None:
    """The canonical text parses to a schema with the same canonical text, and the same descriptor
    once normalized."""
    common = [Resolved("acme/common.proto", SchemaType.PROTOBUF, COMMON)]
    schema = FORMAT.parse(CORPUS[name], common)
    again = FORMAT.parse(schema.canonical(), common)
    assert again.canonical() == schema.canonical()
    assert normalize(again.file) == normalize(schema.file)
