"""One field of the Protobuf compatibility check: its name, its kind and its label compared, as Confluent's
``FieldSchemaDiff`` compares them.

A field's kind is SCALAR (an enum counts as one), MESSAGE or MAP. Scalars are grouped by wire encoding
into the groups Protobuf's "updating a message type" rules allow swapping within: int32, int64, uint32,
uint64, bool and enums; sint32 and sint64; string and bytes; fixed32 and sfixed32; fixed64 and sfixed64;
float; double. A label change (optional, required, repeated) is a difference only when both sides write a
label: Confluent reads labels from the parsed source, where a proto3 field without ``optional`` and a
oneof member have none. Between labels, numbers are incompatible (packed and unpacked encodings differ)
and strings and bytes compatible (a repeated field's last element reads as the singular value).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from google.protobuf import descriptor_pb2

from registry.formats.protobuf_compat_model import Context, DiffType, TypeIndex
from registry.formats.protobuf_print import SCALAR_NAMES

FieldProto = descriptor_pb2.FieldDescriptorProto
LEGACY_REQUIRED = descriptor_pb2.FeatureSet.LEGACY_REQUIRED


class Kind(Enum):
    SCALAR = "scalar"
    MESSAGE = "message"
    MAP = "map"


SCALAR_GROUPS = {
    **dict.fromkeys(("int32", "int64", "uint32", "uint64", "bool", "enum"), "number"),
    **dict.fromkeys(("sint32", "sint64"), "signed number"),
    **dict.fromkeys(("string", "bytes"), "string or bytes"),
    **dict.fromkeys(("fixed32", "sfixed32"), "fixed32"),
    **dict.fromkeys(("fixed64", "sfixed64"), "fixed64"),
    "float": "float",
    "double": "double",
}


@dataclass(frozen=True, slots=True)
class FieldType:
    kind: Kind
    name: str  # a scalar's name, "enum", or a message's full name without the leading dot
    shown: str  # as a difference's detail names it
    key: FieldType | None = None
    value: FieldType | None = None


def field_type(index: TypeIndex, field: FieldProto) -> FieldType:
    scalar = SCALAR_NAMES.get(field.type)
    if scalar is not None:
        return FieldType(Kind.SCALAR, scalar, scalar)
    name = field.type_name.removeprefix(".")
    info = index.get(name)
    if field.type == FieldProto.TYPE_ENUM or (info is not None and info.enum is not None):
        return FieldType(Kind.SCALAR, "enum", f"enum {name}")
    if info is not None and info.is_map and info.message is not None and len(info.message.field) == 2:
        key, value = (field_type(index, entry) for entry in info.message.field)
        return FieldType(Kind.MAP, name, f"map<{key.shown}, {value.shown}>", key, value)
    return FieldType(Kind.MESSAGE, name, name)


def label_of(syntax: str, field: FieldProto, *, in_oneof: bool) -> str | None:
    """The label Confluent sees in the source: None for a oneof member and for a proto3 field written
    without one. An editions field whose presence is LEGACY_REQUIRED is required (its descriptor says
    LABEL_OPTIONAL; Confluent, reading the label only, would miss it)."""
    if in_oneof:
        return None
    if field.proto3_optional:
        return "optional"
    if field.label == FieldProto.LABEL_REPEATED:
        return "repeated"
    if syntax == "proto3":
        return None
    if field.label == FieldProto.LABEL_REQUIRED or field.options.features.field_presence == LEGACY_REQUIRED:
        return "required"
    return "optional"


# Compares two message types by full name (original, update); the walk over messages provides it.
CompareNamed = Callable[[Context, str, str], None]


def compare_field(
    ctx: Context,
    original: FieldProto,
    update: FieldProto,
    labels: tuple[str | None, str | None],
    compare_named: CompareNamed,
) -> None:
    """``original`` and ``update`` share a number; ``labels`` are theirs as ``label_of`` gives them."""
    if original.name != update.name:
        ctx.add(DiffType.FIELD_NAME_CHANGED, f"{original.name} -> {update.name}")
    before, after = field_type(ctx.original, original), field_type(ctx.update, update)
    compare_types(ctx, labels, before, after, compare_named)


def compare_types(
    ctx: Context,
    labels: tuple[str | None, str | None],
    before: FieldType,
    after: FieldType,
    compare_named: CompareNamed,
) -> None:
    if before.kind != after.kind:
        ctx.add(DiffType.FIELD_KIND_CHANGED, f"{before.shown} -> {after.shown}")
    elif before.kind is Kind.SCALAR:
        _compare_scalars(ctx, labels, before, after)
    elif before.kind is Kind.MESSAGE:
        compare_named(ctx, before.name, after.name)
    else:
        assert before.key is not None
        assert before.value is not None
        assert after.key is not None
        assert after.value is not None
        compare_types(ctx, (None, None), before.key, after.key, compare_named)
        compare_types(ctx, (None, None), before.value, after.value, compare_named)


def _compare_scalars(
    ctx: Context, labels: tuple[str | None, str | None], before: FieldType, after: FieldType
) -> None:
    group = SCALAR_GROUPS[before.name]
    if group != SCALAR_GROUPS[after.name]:
        ctx.add(DiffType.FIELD_SCALAR_KIND_CHANGED, f"{before.shown} -> {after.shown}")
        return
    old, new = labels
    if old is None or new is None or old == new:
        return
    if group == "string or bytes":
        ctx.add(DiffType.FIELD_STRING_OR_BYTES_LABEL_CHANGED, f"{old} -> {new}")
    else:
        ctx.add(DiffType.FIELD_NUMERIC_LABEL_CHANGED, f"{old} {before.shown} -> {new} {after.shown}")
