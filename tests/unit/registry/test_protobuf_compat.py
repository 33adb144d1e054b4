"""Protobuf compatibility (Confluent's SchemaDiff rules): every difference type, its path, its verdict,
and the direction the registry's levels use."""

from __future__ import annotations

import pytest

from registry.formats.base import Resolved, SchemaType
from registry.formats.protobuf import FORMAT, ProtobufSchema
from registry.formats.protobuf_compat import diff
from registry.formats.protobuf_compat_model import COMPATIBLE, DiffType
from tests.unit.registry.protobuf_pairs import ORDER, PAIRS, Pair, proto2, proto3


def parse(text: str, files: dict[str, str] | None = None) -> ProtobufSchema:
    references = [Resolved(name, SchemaType.PROTOBUF, source) for name, source in (files or {}).items()]
    return FORMAT.parse(text, references)


def found(old: ProtobufSchema, new: ProtobufSchema) -> list[str]:
    return [f"{difference.type} {difference.path}" for difference in diff(old.files, new.files)]


@pytest.mark.parametrize("pair", PAIRS, ids=[pair.name for pair in PAIRS])
def test_pair(pair: Pair) -> None:
    old, new = parse(pair.old, pair.old_files), parse(pair.new, pair.new_files)
    assert sorted(found(old, new)) == sorted(pair.differences)
    # BACKWARD: the new schema reads what the old one wrote.
    reasons = FORMAT.compatibility(new, old)
    assert (reasons == []) is pair.compatible, reasons


def test_every_difference_type_has_a_pair() -> None:
    covered = {DiffType(difference.split(" ", 1)[0]) for pair in PAIRS for difference in pair.differences}
    assert covered == set(DiffType)


def test_compatible_set_is_confluents() -> None:
    assert {kind.value for kind in COMPATIBLE} == {
        "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED",
        "ENUM_CONST_CHANGED", "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED", "FIELD_NAME_CHANGED",
        "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "ONEOF_ADDED", "ONEOF_REMOVED", "ONEOF_FIELD_ADDED",
        "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
    }  # fmt: skip


def test_messages_name_type_path_and_detail() -> None:
    old = parse(ORDER)
    new = parse(ORDER.replace("int64 total", "string total"))
    assert FORMAT.compatibility(new, old) == ["FIELD_SCALAR_KIND_CHANGED #/Order/2: int64 -> string"]


def test_direction_reader_then_writer() -> None:
    """compatibility(reader, writer): a reader without a message the writer has cannot read its data; a
    reader with one more message can."""
    one = parse(proto3("message Order {\n  string id = 1;\n}\n"))
    two = parse(proto3("message Order {\n  string id = 1;\n}\nmessage Line {\n  int32 qty = 1;\n}\n"))
    assert FORMAT.compatibility(two, one) == []
    assert FORMAT.compatibility(one, two) == ["MESSAGE_REMOVED #/Line"]


def test_descriptor_and_text_forms_compare_equal() -> None:
    text = parse(ORDER)
    descriptor = FORMAT.parse(text.serialized(), [])
    assert diff(text.files, descriptor.files) == []


def test_recursive_types_terminate() -> None:
    tree = proto3(
        "message Node {\n  string name = 1;\n  repeated Node children = 2;\n  Node parent = 3;\n}\n"
    )
    changed = tree.replace("string name = 1;", "int32 name = 1;")
    assert found(parse(tree), parse(changed)) == ["FIELD_SCALAR_KIND_CHANGED #/Node/1"]


def test_recursive_imported_types_terminate() -> None:
    """google.protobuf.Struct and Value refer to each other; comparing through them ends."""
    uses = proto3(
        "message Doc {\n  google.protobuf.Struct body = 1;\n}\n", imports=("google/protobuf/struct.proto",)
    )
    assert found(parse(uses), parse(uses)) == []


def test_type_moved_into_an_import_is_a_removal() -> None:
    local = proto3("message Order {\n  Address to = 1;\n}\nmessage Address {\n  string city = 1;\n}\n")
    imported = proto3("message Order {\n  Address to = 1;\n}\n", imports=("address.proto",))
    files = {"address.proto": proto3("message Address {\n  string city = 1;\n}\n")}
    assert found(parse(local), parse(imported, files)) == ["MESSAGE_REMOVED #/Address"]
    assert found(parse(imported, files), parse(local)) == ["MESSAGE_ADDED #/Address"]


def test_imported_type_in_another_package_keeps_its_name() -> None:
    """Confluent compares a named type by its name inside its package, so moving it to another package's
    file is no change."""
    uses = "message Order {\n  Address to = 1;\n}\n"
    old_files = {"a.proto": proto3("message Address {\n  string city = 1;\n}\n", "shop")}
    new_files = {"a.proto": proto3("message Address {\n  string city = 1;\n}\n", "geo")}
    old = parse(proto3(uses, imports=("a.proto",)), old_files)
    new = parse(proto3(uses.replace("Address to", "geo.Address to"), imports=("a.proto",)), new_files)
    assert found(old, new) == []


def test_nested_paths_and_enum_inside_message() -> None:
    old = proto3(
        "message Order {\n  message Line {\n    int32 qty = 1;\n"
        "    enum Unit {\n      U = 0;\n    }\n  }\n}\n"
    )
    new = old.replace("int32 qty", "string qty").replace("U = 0;", "U = 0;\n      KG = 1;")
    assert sorted(found(parse(old), parse(new))) == [
        "ENUM_CONST_ADDED #/Order/Line/Unit/1",
        "FIELD_SCALAR_KIND_CHANGED #/Order/Line/1",
    ]


def test_proto2_optional_to_required_is_a_label_change() -> None:
    """A field present on both sides is compared by label, required included: for a number that is
    incompatible (as between optional and repeated), for a string not."""
    text = proto2("message Order {\n  optional string id = 1;\n  optional int32 qty = 2;\n}\n")
    assert found(parse(text), parse(text.replace("optional", "required"))) == [
        "FIELD_STRING_OR_BYTES_LABEL_CHANGED #/Order/1",
        "FIELD_NUMERIC_LABEL_CHANGED #/Order/2",
    ]


def test_editions_legacy_required_counts_as_required() -> None:
    old = 'edition = "2023";\npackage shop;\nmessage Order {\n  string id = 1;\n}\n'
    new = old.replace(
        "string id = 1;", "string id = 1;\n  int32 qty = 2 [features.field_presence = LEGACY_REQUIRED];"
    )
    assert found(parse(old), parse(new)) == ["REQUIRED_FIELD_ADDED #/Order/2"]


def test_other_schema_type_is_incompatible() -> None:
    class Other:
        schema_type = SchemaType.AVRO
        text = "{}"

        def canonical(self) -> str:
            return "{}"

        def record_names(self) -> list[str]:
            return []

    reasons = FORMAT.compatibility(parse(ORDER), Other())
    assert len(reasons) == 1
    assert "different schema types" in reasons[0]
