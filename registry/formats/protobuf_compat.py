"""Protobuf compatibility: Confluent's ``SchemaDiff`` over ``FileDescriptorProto``s.

No library checks Protobuf compatibility the way Confluent's registry does (buf's rules, the nearest,
differ on purpose: see the oracle test), so this is a port of its rules, as its ``SchemaDiff``,
``MessageSchemaDiff``, ``FieldSchemaDiff`` and ``EnumSchemaDiff`` read, onto descriptors:

- the package of the schema's own file must not change;
- messages and enums are matched by name in each scope (top level, then inside each message); a message
  that disappears is incompatible, one that appears or moves is not; enums may come and go;
- fields are matched by number across the whole message, whatever oneof holds them, so that a move in or
  out of a oneof cannot hide a change of type; a oneof that gathers fields which could be set together
  before (fields from different oneofs, or top-level fields) is incompatible;
- a field of a message type declared in an import is compared with its counterpart message, and a
  difference there is reported at the type's own path and makes the field ``FIELD_NAMED_TYPE_CHANGED``;
  a type declared in the schema's own file is compared where it is declared;
- synthetic map entry messages are not messages of their own (a map is compared as ``map<K, V>``), as in
  Confluent's reading of ``.proto`` source.

What Confluent's rules do not look at (options, defaults, reserved ranges, services, extensions) is not a
difference here either. Differences are listed in a stable order (names and numbers sorted).

Direction: the original is the schema the data was written with, the update the one that reads it, so
``incompatibilities(reader, writer)`` compares writer to reader.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf import descriptor_pb2

from registry.formats.protobuf_compat_fields import compare_field, label_of
from registry.formats.protobuf_compat_model import Context, Difference, DiffType, TypeIndex, TypeInfo

FileProto = descriptor_pb2.FileDescriptorProto
MessageProto = descriptor_pb2.DescriptorProto
FieldProto = descriptor_pb2.FieldDescriptorProto
EnumProto = descriptor_pb2.EnumDescriptorProto


def diff(original: Sequence[FileProto], update: Sequence[FileProto]) -> list[Difference]:
    """Every difference from ``original`` to ``update``; each is a schema's files, its own file last."""
    ctx = Context(TypeIndex(original), TypeIndex(update))
    if original[-1].package != update[-1].package:
        ctx.add(DiffType.PACKAGE_CHANGED, f"{original[-1].package!r} -> {update[-1].package!r}")
    _compare_scopes(ctx, _top(ctx.original), _top(ctx.update))
    return ctx.differences


def incompatibilities(reader: Sequence[FileProto], writer: Sequence[FileProto]) -> list[str]:
    """Why ``reader`` cannot read what ``writer`` wrote (empty if it can)."""
    return [str(found) for found in diff(writer, reader) if not found.compatible]


Declared = tuple[list[TypeInfo], list[TypeInfo]]


def _declared(
    index: TypeIndex, scope: str, messages: Sequence[MessageProto], enums: Sequence[EnumProto]
) -> Declared:
    """The messages (map entries left out) and enums declared directly in ``scope``."""

    def named(name: str) -> TypeInfo:
        found = index.get(f"{scope}.{name}" if scope else name)
        assert found is not None, "every declared type is indexed"
        return found

    return [named(m.name) for m in messages if not m.options.map_entry], [named(e.name) for e in enums]


def _top(index: TypeIndex) -> Declared:
    return _declared(index, index.own.package, index.own.message_type, index.own.enum_type)


def _inside(index: TypeIndex, info: TypeInfo) -> Declared:
    assert info.message is not None
    return _declared(index, info.full_name, info.message.nested_type, info.message.enum_type)


def _short(info: TypeInfo) -> str:
    return info.full_name.rsplit(".", 1)[-1]


def _compare_scopes(ctx: Context, original: Declared, update: Declared) -> None:
    """The messages and enums of two scopes, matched by name."""
    before = {_short(info): (i, info) for i, info in enumerate(original[0])}
    after = {_short(info): (i, info) for i, info in enumerate(update[0])}
    for name in sorted(before.keys() | after.keys()):
        with ctx.at(name):
            if name not in after:
                ctx.add(DiffType.MESSAGE_REMOVED)
            elif name not in before:
                ctx.add(DiffType.MESSAGE_ADDED)
            else:
                _compare_message(ctx, before[name][1], after[name][1])
                if before[name][0] != after[name][0]:
                    ctx.add(DiffType.MESSAGE_MOVED, f"index {before[name][0]} -> {after[name][0]}")
    old_enums = {_short(info): info for info in original[1]}
    new_enums = {_short(info): info for info in update[1]}
    for name in sorted(old_enums.keys() | new_enums.keys()):
        with ctx.at(name):
            if name not in new_enums:
                ctx.add(DiffType.ENUM_REMOVED)
            elif name not in old_enums:
                ctx.add(DiffType.ENUM_ADDED)
            else:
                _compare_enum(ctx, old_enums[name], new_enums[name])


def _compare_enum(ctx: Context, original: TypeInfo, update: TypeInfo) -> None:
    assert original.enum is not None
    assert update.enum is not None
    # Aliases share a number; the last one declared stands for it, as in Confluent's map by number.
    before = {value.number: value.name for value in original.enum.value}
    after = {value.number: value.name for value in update.enum.value}
    for number in sorted(before.keys() | after.keys()):
        with ctx.at(str(number)):
            if number not in after:
                ctx.add(DiffType.ENUM_CONST_REMOVED, before[number])
            elif number not in before:
                ctx.add(DiffType.ENUM_CONST_ADDED, after[number])
            elif before[number] != after[number]:
                ctx.add(DiffType.ENUM_CONST_CHANGED, f"{before[number]} -> {after[number]}")


def _compare_message(ctx: Context, original: TypeInfo, update: TypeInfo) -> None:
    """Fields, then nested types. A message already being compared further up (a recursive type) has
    its fields compared there."""
    if original.full_name not in ctx.comparing:
        ctx.comparing.add(original.full_name)
        try:
            _compare_fields(ctx, original, update)
            _compare_scopes(ctx, _inside(ctx.original, original), _inside(ctx.update, update))
        finally:
            ctx.comparing.discard(original.full_name)
    else:
        _compare_scopes(ctx, _inside(ctx.original, original), _inside(ctx.update, update))


class _Members:
    """A message's fields by number, each one's real oneof (not a proto3 ``optional`` field's synthetic
    one), and each oneof's members."""

    def __init__(self, message: MessageProto) -> None:
        self.by_number: dict[int, FieldProto] = {}
        self.oneof_of: dict[int, str] = {}
        self.oneofs: dict[str, list[int]] = {}
        for field in message.field:
            self.by_number[field.number] = field
            if field.HasField("oneof_index") and not field.proto3_optional:
                name = message.oneof_decl[field.oneof_index].name
                self.oneof_of[field.number] = name
                self.oneofs.setdefault(name, []).append(field.number)


def _compare_fields(ctx: Context, original: TypeInfo, update: TypeInfo) -> None:
    assert original.message is not None
    assert update.message is not None
    before, after = _Members(original.message), _Members(update.message)
    _new_exclusions(ctx, before, after)
    for name in sorted(before.oneofs.keys() | after.oneofs.keys()):
        with ctx.at(name):
            if name not in after.oneofs:
                ctx.add(DiffType.ONEOF_REMOVED)
            elif name not in before.oneofs:
                ctx.add(DiffType.ONEOF_ADDED)
    # A oneof gone with every member is a deletion (compatible); a member gone from a oneof that
    # survives, or from one whose other members moved elsewhere, loses data.
    deleted = {
        name
        for name, numbers in before.oneofs.items()
        if name not in after.oneofs and not any(number in after.by_number for number in numbers)
    }
    for number in sorted(before.by_number.keys() | after.by_number.keys()):
        old, new = before.by_number.get(number), after.by_number.get(number)
        old_oneof, new_oneof = before.oneof_of.get(number), after.oneof_of.get(number)
        if new is None:
            assert old is not None
            if old_oneof is not None:
                if old_oneof not in deleted:
                    with ctx.at(old_oneof, str(number)):
                        ctx.add(DiffType.ONEOF_FIELD_REMOVED, old.name)
                continue
            with ctx.at(str(number)):
                required = label_of(original.syntax, old, in_oneof=False) == "required"
                ctx.add(DiffType.REQUIRED_FIELD_REMOVED if required else DiffType.FIELD_REMOVED, old.name)
        elif old is None:
            if new_oneof is not None:
                with ctx.at(new_oneof, str(number)):
                    ctx.add(DiffType.ONEOF_FIELD_ADDED, new.name)
                continue
            with ctx.at(str(number)):
                required = label_of(update.syntax, new, in_oneof=False) == "required"
                ctx.add(DiffType.REQUIRED_FIELD_ADDED if required else DiffType.FIELD_ADDED, new.name)
        else:
            if old_oneof is not None and new_oneof is None:
                with ctx.at(str(number)):
                    ctx.add(DiffType.ONEOF_FIELD_MOVED_TO_TOP_LEVEL, f"out of {old_oneof}")
            labels = (
                label_of(original.syntax, old, in_oneof=old_oneof is not None),
                label_of(update.syntax, new, in_oneof=new_oneof is not None),
            )
            path = (new_oneof, str(number)) if new_oneof is not None else (str(number),)
            with ctx.at(*path):
                compare_field(ctx, old, new, labels, _compare_named)


def _new_exclusions(ctx: Context, before: _Members, after: _Members) -> None:
    """A oneof of the update whose members could be set together in the original: they come from more
    than one original oneof, or top-level fields joined one. Fields new in the update do not count (no
    old data sets them)."""
    for name, numbers in after.oneofs.items():
        origins: set[str] = set()
        moved_in = 0
        for number in numbers:
            if number in before.oneof_of:
                origins.add("oneof " + before.oneof_of[number])
            elif number in before.by_number:
                origins.add(f"field {number}")
                moved_in += 1
        if len(origins) > 1:
            with ctx.at(name):
                kind = (
                    DiffType.MULTIPLE_FIELDS_MOVED_TO_ONEOF
                    if moved_in > 1
                    else DiffType.FIELD_MOVED_TO_EXISTING_ONEOF
                )
                ctx.add(kind, ", ".join(sorted(origins)))


def _compare_named(ctx: Context, original_name: str, update_name: str) -> None:
    """Two message types a field has, on each side."""
    original, update = ctx.original.get(original_name), ctx.update.get(update_name)
    if original is None or update is None:
        if original_name != update_name:
            ctx.add(DiffType.FIELD_NAMED_TYPE_CHANGED, f"{original_name} -> {update_name}")
        return
    if original.local_name != update.local_name:
        ctx.add(DiffType.FIELD_NAMED_TYPE_CHANGED, f"{original_name} -> {update_name}")
        return
    if original.own and update.own:
        return  # compared where they are declared
    if original.file == update.file and (
        ctx.original.closures.get(original.file) == ctx.update.closures.get(update.file)
    ):
        return  # the same file with the same imports on both sides: nothing can differ
    inner = ctx.detached(original.local_name.split("."))
    _compare_message(inner, original, update)
    ctx.differences.extend(inner.differences)
    if any(not found.compatible for found in inner.differences):
        ctx.add(DiffType.FIELD_NAMED_TYPE_CHANGED, f"{original_name} differs")
