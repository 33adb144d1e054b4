"""Pairs of Protobuf schemas, an old one (the writer's) and a new one (the reader's), with the differences
Confluent's rules find from old to new: one pair or more per difference type, both directions where both
mean something.

The unit tests check Strata's checker against ``differences``; the buf oracle
(``tests/registry_oracle/test_buf_breaking.py``) runs the same pairs through ``buf breaking``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from registry.formats.protobuf_compat_model import COMPATIBLE, DiffType


def proto3(body: str, package: str = "shop", imports: tuple[str, ...] = ()) -> str:
    head = 'syntax = "proto3";\n' + (f"package {package};\n" if package else "")
    return head + "".join(f'import "{name}";\n' for name in imports) + body


def proto2(body: str, package: str = "shop") -> str:
    return f'syntax = "proto2";\npackage {package};\n' + body


@dataclass(frozen=True)
class Pair:
    name: str
    old: str
    new: str
    differences: tuple[str, ...]  # "TYPE #/path", in any order
    old_files: dict[str, str] = field(default_factory=dict)  # references by import path
    new_files: dict[str, str] = field(default_factory=dict)

    @property
    def compatible(self) -> bool:
        return all(DiffType(found.split(" ", 1)[0]) in COMPATIBLE for found in self.differences)


ORDER = proto3("message Order {\n  string id = 1;\n  int64 total = 2;\n}\n")
ORDER_WITH_NOTE = proto3("message Order {\n  string id = 1;\n  int64 total = 2;\n  string note = 3;\n}\n")
TWO = proto3("message Order {\n  string id = 1;\n}\nmessage Line {\n  int32 qty = 1;\n}\n")
TWO_SWAPPED = proto3("message Line {\n  int32 qty = 1;\n}\nmessage Order {\n  string id = 1;\n}\n")
STATUS = "enum Status {\n  UNKNOWN = 0;\n  OPEN = 1;\n}\n"
WITH_ENUM = proto3("message Order {\n  string id = 1;\n}\n" + STATUS)
ORDER_ONLY = proto3("message Order {\n  string id = 1;\n}\n")
MONEY = "message Money {\n  int64 units = 1;\n}\n"


def _fields(*lines: str, package: str = "shop", syntax: str = "proto3") -> str:
    body = "message Order {\n" + "".join(f"  {line}\n" for line in lines) + "}\n"
    return proto3(body, package) if syntax == "proto3" else proto2(body, package)


def _with_type(field_type: str) -> str:
    return _fields("string id = 1;", f"{field_type} total = 2;")


ADDRESS_V1 = proto3("message Address {\n  string city = 1;\n  int32 zip = 2;\n}\n", "common")
ADDRESS_V2 = proto3("message Address {\n  string city = 1;\n  string zip = 2;\n}\n", "common")
USES_ADDRESS = proto3(
    "message Order {\n  string id = 1;\n  common.Address ship_to = 2;\n}\n", imports=("common.proto",)
)

PAIRS: tuple[Pair, ...] = (
    Pair("unchanged", ORDER, ORDER, ()),
    Pair("package changed", ORDER, ORDER.replace("package shop;", "package store;"), ("PACKAGE_CHANGED #/",)),
    Pair("message added", ORDER_ONLY, TWO, ("MESSAGE_ADDED #/Line",)),
    Pair("message removed", TWO, ORDER_ONLY, ("MESSAGE_REMOVED #/Line",)),
    Pair("messages reordered", TWO, TWO_SWAPPED, ("MESSAGE_MOVED #/Line", "MESSAGE_MOVED #/Order")),
    Pair(
        "nested message added",
        ORDER_ONLY,
        proto3("message Order {\n  string id = 1;\n  message Gift {\n    string note = 1;\n  }\n}\n"),
        ("MESSAGE_ADDED #/Order/Gift",),
    ),
    Pair("enum added", ORDER_ONLY, WITH_ENUM, ("ENUM_ADDED #/Status",)),
    Pair("enum removed", WITH_ENUM, ORDER_ONLY, ("ENUM_REMOVED #/Status",)),
    Pair(
        "enum constant added",
        WITH_ENUM,
        WITH_ENUM.replace("OPEN = 1;", "OPEN = 1;\n  PAID = 2;"),
        ("ENUM_CONST_ADDED #/Status/2",),
    ),
    Pair(
        "enum constant removed",
        WITH_ENUM.replace("OPEN = 1;", "OPEN = 1;\n  PAID = 2;"),
        WITH_ENUM,
        ("ENUM_CONST_REMOVED #/Status/2",),
    ),
    Pair(
        "enum constant renamed",
        WITH_ENUM,
        WITH_ENUM.replace("OPEN = 1;", "PENDING = 1;"),
        ("ENUM_CONST_CHANGED #/Status/1",),
    ),
    Pair("field added", ORDER, ORDER_WITH_NOTE, ("FIELD_ADDED #/Order/3",)),
    Pair("field removed", ORDER_WITH_NOTE, ORDER, ("FIELD_REMOVED #/Order/3",)),
    Pair("field renamed", ORDER, ORDER.replace("total", "amount"), ("FIELD_NAME_CHANGED #/Order/2",)),
    Pair(
        "field renumbered",
        ORDER,
        ORDER.replace("total = 2", "total = 3"),
        ("FIELD_REMOVED #/Order/2", "FIELD_ADDED #/Order/3"),
    ),
    Pair("int64 to uint64", _with_type("int64"), _with_type("uint64"), ()),
    Pair("int32 to bool", _with_type("int32"), _with_type("bool"), ()),
    Pair("string to bytes", _with_type("string"), _with_type("bytes"), ()),
    Pair("fixed32 to sfixed32", _with_type("fixed32"), _with_type("sfixed32"), ()),
    Pair(
        "int64 to string",
        _with_type("int64"),
        _with_type("string"),
        ("FIELD_SCALAR_KIND_CHANGED #/Order/2",),
    ),
    Pair(
        "int64 to sint64",
        _with_type("int64"),
        _with_type("sint64"),
        ("FIELD_SCALAR_KIND_CHANGED #/Order/2",),
    ),
    Pair(
        "fixed32 to fixed64",
        _with_type("fixed32"),
        _with_type("fixed64"),
        ("FIELD_SCALAR_KIND_CHANGED #/Order/2",),
    ),
    Pair(
        "float to double",
        _with_type("float"),
        _with_type("double"),
        ("FIELD_SCALAR_KIND_CHANGED #/Order/2",),
    ),
    Pair(
        "int32 to enum",
        proto3("message Order {\n  string id = 1;\n  int32 status = 2;\n}\n" + STATUS),
        proto3("message Order {\n  string id = 1;\n  Status status = 2;\n}\n" + STATUS),
        (),
    ),
    Pair(
        "scalar to message",
        proto3("message Order {\n  string id = 1;\n  int64 total = 2;\n}\n" + MONEY),
        proto3("message Order {\n  string id = 1;\n  Money total = 2;\n}\n" + MONEY),
        ("FIELD_KIND_CHANGED #/Order/2",),
    ),
    Pair(
        "map to repeated message",
        _fields("map<string, int32> stock = 1;"),
        _fields("repeated Item stock = 1;").replace("}\n", "}\nmessage Item {\n  string key = 1;\n}\n", 1),
        ("FIELD_KIND_CHANGED #/Order/1", "MESSAGE_ADDED #/Item"),
    ),
    Pair(
        "map value kind changed",
        _fields("map<string, int32> stock = 1;"),
        _fields("map<string, string> stock = 1;"),
        ("FIELD_SCALAR_KIND_CHANGED #/Order/1",),
    ),
    Pair(
        "message type renamed",
        proto3("message Order {\n  Money total = 1;\n}\nmessage Money {\n  int64 units = 1;\n}\n"),
        proto3("message Order {\n  Cash total = 1;\n}\nmessage Cash {\n  int64 units = 1;\n}\n"),
        ("FIELD_NAMED_TYPE_CHANGED #/Order/1", "MESSAGE_REMOVED #/Money", "MESSAGE_ADDED #/Cash"),
    ),
    Pair(
        "imported message changed",
        USES_ADDRESS,
        USES_ADDRESS,
        ("FIELD_SCALAR_KIND_CHANGED #/Address/2", "FIELD_NAMED_TYPE_CHANGED #/Order/2"),
        old_files={"common.proto": ADDRESS_V1},
        new_files={"common.proto": ADDRESS_V2},
    ),
    Pair(
        "imported message field added",
        USES_ADDRESS,
        USES_ADDRESS,
        ("FIELD_ADDED #/Address/3",),
        old_files={"common.proto": ADDRESS_V1},
        new_files={
            "common.proto": ADDRESS_V1.replace("int32 zip = 2;", "int32 zip = 2;\n  string street = 3;")
        },
    ),
    Pair(
        "proto2 optional int32 to repeated",
        _fields("optional int32 qty = 1;", syntax="proto2"),
        _fields("repeated int32 qty = 1;", syntax="proto2"),
        ("FIELD_NUMERIC_LABEL_CHANGED #/Order/1",),
    ),
    Pair(
        "proto3 optional int64 to repeated",
        _fields("optional int64 qty = 1;"),
        _fields("repeated int64 qty = 1;"),
        ("FIELD_NUMERIC_LABEL_CHANGED #/Order/1",),
    ),
    Pair(
        "proto2 optional string to repeated",
        _fields("optional string tag = 1;", syntax="proto2"),
        _fields("repeated string tag = 1;", syntax="proto2"),
        ("FIELD_STRING_OR_BYTES_LABEL_CHANGED #/Order/1",),
    ),
    Pair(
        "proto3 bytes to repeated",
        _fields("optional bytes tag = 1;"),
        _fields("repeated bytes tag = 1;"),
        ("FIELD_STRING_OR_BYTES_LABEL_CHANGED #/Order/1",),
    ),
    # A proto3 field written without a label has none in Confluent's reading, so no label changed.
    Pair(
        "proto3 implicit int32 to repeated", _fields("int32 qty = 1;"), _fields("repeated int32 qty = 1;"), ()
    ),
    Pair(
        "required field added",
        _fields("required string id = 1;", syntax="proto2"),
        _fields("required string id = 1;", "required int32 qty = 2;", syntax="proto2"),
        ("REQUIRED_FIELD_ADDED #/Order/2",),
    ),
    Pair(
        "required field removed",
        _fields("required string id = 1;", "required int32 qty = 2;", syntax="proto2"),
        _fields("required string id = 1;", syntax="proto2"),
        ("REQUIRED_FIELD_REMOVED #/Order/2",),
    ),
    Pair(
        "field moved into a new oneof",
        _fields("string id = 1;", "string card = 2;"),
        _fields("string id = 1;", "oneof payment {\n    string card = 2;\n  }"),
        ("ONEOF_ADDED #/Order/payment",),
    ),
    Pair(
        "oneof with a new field",
        _fields("string id = 1;", "string card = 2;"),
        _fields("string id = 1;", "string card = 2;", "oneof payment {\n    string iban = 3;\n  }"),
        ("ONEOF_ADDED #/Order/payment", "ONEOF_FIELD_ADDED #/Order/payment/3"),
    ),
    Pair(
        "oneof removed with its fields",
        _fields("string id = 1;", "oneof payment {\n    string card = 2;\n    string iban = 3;\n  }"),
        _fields("string id = 1;"),
        ("ONEOF_REMOVED #/Order/payment",),
    ),
    Pair(
        "oneof renamed",
        _fields("string id = 1;", "oneof payment {\n    string card = 2;\n    string iban = 3;\n  }"),
        _fields("string id = 1;", "oneof method {\n    string card = 2;\n    string iban = 3;\n  }"),
        ("ONEOF_REMOVED #/Order/payment", "ONEOF_ADDED #/Order/method"),
    ),
    Pair(
        "oneof field added",
        _fields("oneof payment {\n    string card = 2;\n  }"),
        _fields("oneof payment {\n    string card = 2;\n    string iban = 3;\n  }"),
        ("ONEOF_FIELD_ADDED #/Order/payment/3",),
    ),
    Pair(
        "oneof field removed",
        _fields("oneof payment {\n    string card = 2;\n    string iban = 3;\n  }"),
        _fields("oneof payment {\n    string card = 2;\n  }"),
        ("ONEOF_FIELD_REMOVED #/Order/payment/3",),
    ),
    Pair(
        "oneof field moved to top level",
        _fields("oneof payment {\n    string card = 2;\n    string iban = 3;\n  }"),
        _fields("string iban = 3;", "oneof payment {\n    string card = 2;\n  }"),
        ("ONEOF_FIELD_MOVED_TO_TOP_LEVEL #/Order/3",),
    ),
    Pair(
        "two fields moved into a new oneof",
        _fields("string card = 2;", "string iban = 3;"),
        _fields("oneof payment {\n    string card = 2;\n    string iban = 3;\n  }"),
        ("ONEOF_ADDED #/Order/payment", "MULTIPLE_FIELDS_MOVED_TO_ONEOF #/Order/payment"),
    ),
    Pair(
        "field moved into an existing oneof",
        _fields("string iban = 3;", "oneof payment {\n    string card = 2;\n  }"),
        _fields("oneof payment {\n    string card = 2;\n    string iban = 3;\n  }"),
        ("FIELD_MOVED_TO_EXISTING_ONEOF #/Order/payment",),
    ),
    Pair(
        "oneof member changes type",
        _fields("oneof payment {\n    string card = 2;\n    int64 points = 3;\n  }"),
        _fields("oneof payment {\n    string card = 2;\n    string points = 3;\n  }"),
        ("FIELD_SCALAR_KIND_CHANGED #/Order/payment/3",),
    ),
)
