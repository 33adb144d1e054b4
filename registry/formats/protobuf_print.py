"""A ``FileDescriptorProto`` printed as ``.proto`` source that protoc compiles back to the same descriptor.

A schema registered as a base64 descriptor (what confluent-kafka's ProtobufSerializer sends) has no text of
its own, yet ``GET /schemas/ids/{id}`` answers with text by default and Java and Go clients parse it; the
canonical form is this printer's output too. protobuf ships no such printer (``text_format`` prints
messages, not schemas), so this module is one; the tests recompile its output and compare descriptors.

Choices that keep the output unambiguous and stable:
- type names are printed as the descriptor holds them, fully qualified with a leading dot
  (``.pkg.Outer.Inner``), so no scoping rule can resolve them to another type;
- a map field is printed as ``map<K, V>`` and its synthetic entry message is not printed; a proto2 group
  is printed inline (``optional group Name = 1 { ... }``) and its message is not printed again;
- a oneof is printed where its first member stands; proto3 ``optional`` fields' synthetic oneofs are not
  printed (the ``optional`` label makes them);
- comments are not in descriptors, so there are none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from google.protobuf import descriptor_pb2, descriptor_pool

from registry.formats.protobuf_options import OptionPrinter, quote_string

FieldProto = descriptor_pb2.FieldDescriptorProto
MessageProto = descriptor_pb2.DescriptorProto

SCALAR_NAMES = {
    FieldProto.TYPE_DOUBLE: "double",
    FieldProto.TYPE_FLOAT: "float",
    FieldProto.TYPE_INT64: "int64",
    FieldProto.TYPE_UINT64: "uint64",
    FieldProto.TYPE_INT32: "int32",
    FieldProto.TYPE_FIXED64: "fixed64",
    FieldProto.TYPE_FIXED32: "fixed32",
    FieldProto.TYPE_BOOL: "bool",
    FieldProto.TYPE_STRING: "string",
    FieldProto.TYPE_BYTES: "bytes",
    FieldProto.TYPE_UINT32: "uint32",
    FieldProto.TYPE_SFIXED32: "sfixed32",
    FieldProto.TYPE_SFIXED64: "sfixed64",
    FieldProto.TYPE_SINT32: "sint32",
    FieldProto.TYPE_SINT64: "sint64",
}
# The largest field number; a message's reserved and extension ranges end exclusive, so ``max`` is this + 1.
MAX_FIELD_NUMBER = 536_870_911
# An enum's reserved ranges end inclusive; ``max`` is the largest int32.
MAX_ENUM_NUMBER = 2_147_483_647


class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def line(self, text: str = "") -> None:
        self.lines.append("  " * self.depth + text if text else "")

    def open(self, head: str) -> None:
        self.line(head + " {")
        self.depth += 1

    def close(self) -> None:
        self.depth -= 1
        self.line("}")


@dataclass(frozen=True, slots=True)
class _Ctx:
    syntax: str  # "proto2", "proto3" or "editions"
    options: OptionPrinter


@dataclass(frozen=True, slots=True)
class _Scope:
    """Where fields are declared: the message (or file) whose nested types a field's map entry or group
    message is, by fully qualified name with a leading dot."""

    name: str
    nested: dict[str, MessageProto]

    def nested_of(self, field: FieldProto) -> MessageProto | None:
        prefix = self.name + "."
        if not field.type_name.startswith(prefix):
            return None
        return self.nested.get(field.type_name[len(prefix) :])

    def map_entry(self, field: FieldProto) -> MessageProto | None:
        if field.type != FieldProto.TYPE_MESSAGE or field.label != FieldProto.LABEL_REPEATED:
            return None
        entry = self.nested_of(field)
        return entry if entry is not None and entry.options.map_entry else None


def syntax_of(file: descriptor_pb2.FileDescriptorProto) -> str:
    return file.syntax if file.syntax in ("proto3", "editions") else "proto2"


def print_file(
    file: descriptor_pb2.FileDescriptorProto,
    pool: descriptor_pool.DescriptorPool | None = None,
    *,
    options_by_name: bool = False,
    extra_options: Mapping[tuple[str, str], Sequence[tuple[str, str]]] | None = None,
) -> str:
    """``file`` as ``.proto`` source. ``pool`` holds the file and its imports, so custom options can be
    named; without it only standard options print (``UnprintableOption`` otherwise). ``options_by_name``
    prints each options message's assignments sorted by name, as Confluent prints a normalized schema.
    ``extra_options``: assignments that are not in the descriptor, by element (``OptionPrinter``)."""
    ctx = _Ctx(syntax_of(file), OptionPrinter(pool, by_name=options_by_name, extra=extra_options))
    out = _Out()
    _header(out, ctx, file)
    scope = _Scope("." + file.package if file.package else "", {m.name: m for m in file.message_type})
    hidden = _hidden_types(scope, list(file.extension))
    for msg in file.message_type:
        if msg.name not in hidden:
            out.line()
            _message(out, ctx, scope, msg)
    for enum in file.enum_type:
        out.line()
        _enum(out, ctx, scope, enum)
    if file.extension:
        out.line()
        _extends(out, ctx, scope, list(file.extension))
    for service in file.service:
        out.line()
        _service(out, ctx, scope, service)
    return "\n".join(out.lines) + "\n"


def _header(out: _Out, ctx: _Ctx, file: descriptor_pb2.FileDescriptorProto) -> None:
    if ctx.syntax == "editions":
        edition = descriptor_pb2.Edition.Name(file.edition).removeprefix("EDITION_")
        out.line(f'edition = "{edition}";')
    else:
        out.line(f'syntax = "{ctx.syntax}";')
    if file.package:
        out.line(f"package {file.package};")
    if file.dependency:
        out.line()
    public, weak = set(file.public_dependency), set(file.weak_dependency)
    for index, dependency in enumerate(file.dependency):
        kind = "public " if index in public else "weak " if index in weak else ""
        out.line(f"import {kind}{quote_string(dependency)};")
    for dependency in getattr(file, "option_dependency", ()):
        out.line(f"import option {quote_string(dependency)};")
    statements = ctx.options.assignments(file.options, "file", "")
    if statements:
        out.line()
    for statement in statements:
        out.line(f"option {statement};")


def _hidden_types(scope: _Scope, fields: list[FieldProto]) -> set[str]:
    """The nested messages printed elsewhere: map entries, and groups (printed at their field)."""
    hidden = {name for name, msg in scope.nested.items() if msg.options.map_entry}
    for field in fields:
        if field.type == FieldProto.TYPE_GROUP:
            group = scope.nested_of(field)
            if group is not None:
                hidden.add(group.name)
    return hidden


def _message(out: _Out, ctx: _Ctx, parent: _Scope, msg: MessageProto) -> None:
    out.open(f"message {msg.name}")
    _message_body(out, ctx, parent, msg)
    out.close()


def _message_body(out: _Out, ctx: _Ctx, parent: _Scope, msg: MessageProto) -> None:
    scope = _Scope(f"{parent.name}.{msg.name}", {m.name: m for m in msg.nested_type})
    for statement in ctx.options.assignments(msg.options, "message", scope.name):
        out.line(f"option {statement};")
    _fields(out, ctx, scope, msg)
    hidden = _hidden_types(scope, [*msg.field, *msg.extension])
    for nested in msg.nested_type:
        if nested.name not in hidden:
            _message(out, ctx, scope, nested)
    for enum in msg.enum_type:
        _enum(out, ctx, scope, enum)
    if msg.extension:
        _extends(out, ctx, scope, list(msg.extension))
    for extension_range in msg.extension_range:
        where = f"{scope.name}:{extension_range.start}"
        options = ctx.options.assignments(extension_range.options, "extension_range", where)
        span = _span(extension_range.start, extension_range.end - 1, MAX_FIELD_NUMBER)
        out.line(f"extensions {span}{_bracket(options)};")
    _reserved(
        out, ctx, [(r.start, r.end - 1) for r in msg.reserved_range], MAX_FIELD_NUMBER, msg.reserved_name
    )


def _fields(out: _Out, ctx: _Ctx, scope: _Scope, msg: MessageProto) -> None:
    """Fields in descriptor order; a real oneof's members together, where its first member stands."""
    done: set[int] = set()
    for field in msg.field:
        in_oneof = field.HasField("oneof_index") and not field.proto3_optional
        if not in_oneof:
            _field(out, ctx, scope, field, in_oneof=False)
            continue
        if field.oneof_index in done:
            continue
        done.add(field.oneof_index)
        oneof = msg.oneof_decl[field.oneof_index]
        out.open(f"oneof {oneof.name}")
        for statement in ctx.options.assignments(oneof.options, "oneof", f"{scope.name}.{oneof.name}"):
            out.line(f"option {statement};")
        for member in msg.field:
            if member.HasField("oneof_index") and member.oneof_index == field.oneof_index:
                _field(out, ctx, scope, member, in_oneof=True)
        out.close()


def _field(out: _Out, ctx: _Ctx, scope: _Scope, field: FieldProto, *, in_oneof: bool) -> None:
    entry = scope.map_entry(field)
    label = "" if in_oneof or entry is not None else _label(ctx, field)
    options = _bracket(_field_options(ctx, field, f"{scope.name}.{field.name}"))
    if entry is not None:
        key, value = _type_name(entry.field[0]), _type_name(entry.field[1])
        out.line(f"map<{key}, {value}> {field.name} = {field.number}{options};")
        return
    group = scope.nested_of(field) if field.type == FieldProto.TYPE_GROUP else None
    if group is None:
        out.line(f"{label}{_type_name(field)} {field.name} = {field.number}{options};")
        return
    out.open(f"{label}group {group.name} = {field.number}{options}")
    _message_body(out, ctx, scope, group)
    out.close()


def _label(ctx: _Ctx, field: FieldProto) -> str:
    if field.label == FieldProto.LABEL_REPEATED:
        return "repeated "
    if ctx.syntax == "proto2":
        return "required " if field.label == FieldProto.LABEL_REQUIRED else "optional "
    if ctx.syntax == "proto3" and field.proto3_optional:
        return "optional "
    return ""


def _type_name(field: FieldProto) -> str:
    return SCALAR_NAMES.get(field.type) or field.type_name


def _field_options(ctx: _Ctx, field: FieldProto, full_name: str) -> list[str]:
    items = []
    if field.HasField("default_value"):
        items.append(f"default = {_default(field)}")
    if field.HasField("json_name"):
        items.append(f"json_name = {quote_string(field.json_name)}")
    return items + ctx.options.assignments(field.options, "field", full_name)


def _default(field: FieldProto) -> str:
    if field.type == FieldProto.TYPE_STRING:
        return quote_string(field.default_value)
    if field.type == FieldProto.TYPE_BYTES:
        # A bytes default is held C-escaped already, as it is written in source.
        return f'"{field.default_value}"'
    return field.default_value


def _bracket(items: list[str]) -> str:
    return f" [{', '.join(items)}]" if items else ""


def _span(start: int, end_inclusive: int, maximum: int) -> str:
    if end_inclusive == start:
        return str(start)
    return f"{start} to {'max' if end_inclusive >= maximum else end_inclusive}"


def _reserved(
    out: _Out, ctx: _Ctx, ranges: list[tuple[int, int]], maximum: int, names: Iterable[str]
) -> None:
    if ranges:
        out.line(f"reserved {', '.join(_span(start, end, maximum) for start, end in ranges)};")
    listed = list(names)
    if listed:
        # Editions write reserved names as identifiers; proto2 and proto3 as strings.
        shown = listed if ctx.syntax == "editions" else [quote_string(name) for name in listed]
        out.line(f"reserved {', '.join(shown)};")


def _enum(out: _Out, ctx: _Ctx, parent: _Scope, enum: descriptor_pb2.EnumDescriptorProto) -> None:
    full_name = f"{parent.name}.{enum.name}"
    out.open(f"enum {enum.name}")
    for statement in ctx.options.assignments(enum.options, "enum", full_name):
        out.line(f"option {statement};")
    for value in enum.value:
        options = ctx.options.assignments(value.options, "enum_value", f"{full_name}.{value.name}")
        out.line(f"{value.name} = {value.number}{_bracket(options)};")
    ranges = [(r.start, r.end) for r in enum.reserved_range]
    _reserved(out, ctx, ranges, MAX_ENUM_NUMBER, enum.reserved_name)
    out.close()


def _extends(out: _Out, ctx: _Ctx, scope: _Scope, extensions: list[FieldProto]) -> None:
    """``extend`` blocks, one per run of extensions of the same message, in descriptor order."""
    runs: list[tuple[str, list[FieldProto]]] = []
    for field in extensions:
        if runs and runs[-1][0] == field.extendee:
            runs[-1][1].append(field)
        else:
            runs.append((field.extendee, [field]))
    for extendee, fields in runs:
        out.open(f"extend {extendee}")
        for field in fields:
            _field(out, ctx, scope, field, in_oneof=False)
        out.close()


def _service(out: _Out, ctx: _Ctx, file: _Scope, service: descriptor_pb2.ServiceDescriptorProto) -> None:
    full_name = f"{file.name}.{service.name}"
    out.open(f"service {service.name}")
    for statement in ctx.options.assignments(service.options, "service", full_name):
        out.line(f"option {statement};")
    for method in service.method:
        source = ("stream " if method.client_streaming else "") + method.input_type
        sink = ("stream " if method.server_streaming else "") + method.output_type
        head = f"rpc {method.name}({source}) returns ({sink})"
        statements = ctx.options.assignments(method.options, "method", f"{full_name}.{method.name}")
        if not statements:
            out.line(head + ";")
            continue
        out.open(head)
        for statement in statements:
            out.line(f"option {statement};")
        out.close()
    out.close()
