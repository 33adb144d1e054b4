"""A Protobuf schema's normal form: its ``FileDescriptorProto`` with every order and spelling that does not
change its meaning made one, so that printing it gives the canonical text (``normalize=true``; the
registry fingerprints it).

Made one, as Confluent's normalization does:
- imports sorted and without duplicates (``public`` and ``weak`` marks follow their file);
- a message's fields in field-number order, its oneofs in the order of their first field (proto3
  ``optional`` fields' synthetic oneofs stay last, as protoc requires), extensions by (extendee, number);
- enum values by (number, name); reserved ranges, reserved names and extension ranges sorted;
- a ``json_name`` equal to the one protoc derives from the field name dropped (protoc's descriptor sets and
  the Python generator's differ on writing it), ``syntax = "proto2"`` written as absent (its default),
  source code info dropped.

Kept as they are, because they carry meaning: the order of messages, enums and services (message indexes
address messages by position), the file's package and name, and options (a serialized options message is
already in field-number order; a repeated option keeps its order). The canonical text prints each options
message's assignments by name, as Confluent prints a normalized schema (protobuf_options).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from google.protobuf import descriptor_pb2, message
from google.protobuf.internal.containers import RepeatedCompositeFieldContainer, RepeatedScalarFieldContainer

FileProto = descriptor_pb2.FileDescriptorProto
MessageProto = descriptor_pb2.DescriptorProto
FieldProto = descriptor_pb2.FieldDescriptorProto
M = TypeVar("M", bound=message.Message)


def default_json_name(name: str) -> str:
    """protoc's ``ToJsonName``: underscores dropped, the letter after each one upper-cased."""
    out: list[str] = []
    upper = False
    for char in name:
        if char == "_":
            upper = True
        elif upper:
            out.append(char.upper())
            upper = False
        else:
            out.append(char)
    return "".join(out)


def normalize(file: FileProto) -> FileProto:
    """A normalized copy of ``file``."""
    out = FileProto()
    out.CopyFrom(file)
    out.ClearField("source_code_info")
    if out.syntax == "proto2":
        out.ClearField("syntax")
    _sort_imports(out)
    for declared in out.message_type:
        _message(declared)
    _drop_default_json_names(out.extension)
    _resort(out.extension, lambda f: (f.extendee, f.number))
    for enum in out.enum_type:
        _enum(enum)
    return out


def _sort_imports(file: FileProto) -> None:
    public = {file.dependency[i] for i in file.public_dependency if i < len(file.dependency)}
    weak = {file.dependency[i] for i in file.weak_dependency if i < len(file.dependency)}
    ordered = sorted(set(file.dependency))
    file.ClearField("dependency")
    file.ClearField("public_dependency")
    file.ClearField("weak_dependency")
    file.dependency.extend(ordered)
    file.public_dependency.extend(i for i, name in enumerate(ordered) if name in public)
    file.weak_dependency.extend(i for i, name in enumerate(ordered) if name in weak)


def _resort(container: RepeatedCompositeFieldContainer[M], key: Callable[[M], Any]) -> None:
    """Sort a repeated message field in place (protobuf's containers have no ``sort`` for messages)."""
    _replace(container, sorted(container, key=key))


def _replace(container: RepeatedCompositeFieldContainer[M], ordered: list[M]) -> None:
    copies = []
    for item in ordered:
        copy = type(item)()
        copy.CopyFrom(item)
        copies.append(copy)
    del container[:]
    container.extend(copies)


def _resort_names(container: RepeatedScalarFieldContainer[str]) -> None:
    names = sorted(set(container))
    del container[:]
    container.extend(names)


def _message(message: MessageProto) -> None:
    _oneofs(message)
    _drop_default_json_names(message.field)
    _drop_default_json_names(message.extension)
    _resort(message.field, lambda f: f.number)
    _resort(message.extension, lambda f: (f.extendee, f.number))
    _resort(message.extension_range, lambda r: (r.start, r.end))
    _resort(message.reserved_range, lambda r: (r.start, r.end))
    _resort_names(message.reserved_name)
    for nested in message.nested_type:
        _message(nested)
    for enum in message.enum_type:
        _enum(enum)


def _drop_default_json_names(fields: RepeatedCompositeFieldContainer[FieldProto]) -> None:
    for field in fields:
        if field.HasField("json_name") and field.json_name == default_json_name(field.name):
            field.ClearField("json_name")


def _oneofs(message: MessageProto) -> None:
    """Real oneofs by their smallest field number, then the synthetic ones by theirs; fields follow."""
    if not message.oneof_decl:
        return
    first: dict[int, tuple[bool, int]] = {}
    for field in message.field:
        if field.HasField("oneof_index"):
            key = (field.proto3_optional, field.number)
            first[field.oneof_index] = min(first.get(field.oneof_index, key), key)
    count = len(message.oneof_decl)
    order = sorted(range(count), key=lambda i: (*first.get(i, (True, 1 << 30)), i))
    renumber = {old: new for new, old in enumerate(order)}
    _replace(message.oneof_decl, [message.oneof_decl[old] for old in order])
    for field in message.field:
        if field.HasField("oneof_index") and field.oneof_index < count:
            field.oneof_index = renumber[field.oneof_index]


def _enum(enum: descriptor_pb2.EnumDescriptorProto) -> None:
    _resort(enum.value, lambda v: (v.number, v.name))
    _resort(enum.reserved_range, lambda r: (r.start, r.end))
    _resort_names(enum.reserved_name)
