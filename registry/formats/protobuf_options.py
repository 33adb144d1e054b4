"""Descriptor options printed as ``.proto`` option assignments, custom options (extensions) included.

A descriptor's options messages (``FileOptions``, ``FieldOptions``, ...) are ``descriptor_pb2`` messages,
which know only the standard options: a custom option such as ``(confluent.field_meta)`` is an unknown field
in them. To print it, the options are re-read with the ``FieldOptions`` class of a descriptor pool that holds
the schema's own files, where the extensions that define the custom options live; protobuf's own
``message_factory`` and ``text_format`` then give each option's name and value (a message-valued option as
a ``{ ... }`` aggregate, which protoc parses). An option that no file of the schema defines cannot be named,
so it is an error, never dropped silently.

Options that no import defines are not in descriptors at all (``protobuf_undefined``): a printer is given
them as ready assignments by element (``extra``), and prints them after the element's defined options, or
among them by name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from google.protobuf import descriptor_pool, message, message_factory, text_encoding, text_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.unknown_fields import UnknownFieldSet


class UnprintableOption(ValueError):
    """An options message holds a field that no file of the schema defines."""


def _is_repeated(field: FieldDescriptor) -> bool:
    # protobuf 7 dropped FieldDescriptor.label for is_repeated; older runtimes have only the label.
    repeated = getattr(field, "is_repeated", None)
    if isinstance(repeated, bool):
        return repeated
    return bool(getattr(field, "label", None) == FieldDescriptor.LABEL_REPEATED)


class OptionPrinter:
    """Prints the options of one schema's descriptors, custom options resolved in ``pool``.

    ``by_name`` orders each options message's assignments by option name (a custom option by its full
    name, without the parentheses), as Confluent's normalization does, so that a normalized schema prints
    as Confluent prints it; otherwise they come in field-number order. Either order compiles to the same
    descriptor: serialized options are in field-number order whatever the text's order.

    ``extra`` maps an element, ``(kind, full name)`` as ``protobuf_option_scan.UndefinedOption`` names it,
    to assignments that are not in its options message, each with its sort key, in their order."""

    def __init__(
        self,
        pool: descriptor_pool.DescriptorPool | None,
        *,
        by_name: bool = False,
        extra: Mapping[tuple[str, str], Sequence[tuple[str, str]]] | None = None,
    ) -> None:
        self._pool = pool
        self._by_name = by_name
        self._extra = extra or {}
        self._classes: dict[str, type[message.Message] | None] = {}

    def assignments(self, options: message.Message, kind: str = "", scope: str = "") -> list[str]:
        """``name = value`` for every option set in ``options``, in field-number order or by name (the class
        docstring), then the element's extra assignments (among them by name); a repeated option gives one
        assignment per element, in its order, as protoc reads them back."""
        keyed = self._defined(options)
        keyed.extend(self._extra.get((kind, scope), ()))
        if self._by_name:
            # Stable: a repeated option's elements, and equal names, keep their order.
            keyed.sort(key=lambda item: item[0])
        return [assignment for _key, assignment in keyed]

    def _defined(self, options: message.Message) -> list[tuple[str, str]]:
        if options.ByteSize() == 0:
            return []
        readable = self._reread(options)
        unknown = UnknownFieldSet(readable)
        if len(unknown):
            numbers = sorted({unknown[i].field_number for i in range(len(unknown))})
            raise UnprintableOption(
                f"{options.DESCRIPTOR.full_name} sets field(s) {numbers} that no imported file defines"
            )
        out: list[tuple[str, str]] = []
        for field, value in readable.ListFields():
            key = field.full_name if field.is_extension else field.name
            name = f"(.{field.full_name})" if field.is_extension else field.name
            values = list(value) if _is_repeated(field) else [value]
            out.extend((key, f"{name} = {format_value(field, item)}") for item in values)
        return out

    def _reread(self, options: message.Message) -> message.Message:
        full_name = options.DESCRIPTOR.full_name
        if full_name not in self._classes:
            self._classes[full_name] = self._class_for(full_name)
        cls = self._classes[full_name]
        if cls is None:
            return options
        return cls.FromString(options.SerializeToString())

    def _class_for(self, full_name: str) -> type[message.Message] | None:
        if self._pool is None:
            return None
        try:
            descriptor = self._pool.FindMessageTypeByName(full_name)
        except KeyError:
            # The schema does not import descriptor.proto, so it defines no custom option.
            return None
        return message_factory.GetMessageClass(descriptor)


def format_value(field: FieldDescriptor, value: object) -> str:
    """One option value as ``.proto`` source writes it."""
    if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        assert isinstance(value, message.Message)
        body = text_format.MessageToString(value, as_one_line=True)
        return "{ " + body + " }" if body else "{}"
    if field.type == FieldDescriptor.TYPE_ENUM:
        assert isinstance(value, int)
        named = field.enum_type.values_by_number.get(value) if field.enum_type else None
        return named.name if named is not None else str(value)
    if field.type == FieldDescriptor.TYPE_BOOL:
        return "true" if value else "false"
    if field.type == FieldDescriptor.TYPE_STRING:
        assert isinstance(value, str)
        return quote_string(value)
    if field.type == FieldDescriptor.TYPE_BYTES:
        assert isinstance(value, bytes)
        return '"' + text_encoding.CEscape(value, as_utf8=False) + '"'
    if field.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        assert isinstance(value, float)
        return format_float(value)
    return str(value)


def quote_string(value: str) -> str:
    return '"' + text_encoding.CEscape(value.encode("utf-8"), as_utf8=True) + '"'


def format_float(value: float) -> str:
    """A float as protoc reads it back: ``inf``, ``-inf``, ``nan``, else the shortest exact decimal (a
    float32 widened to a double reads back as the same float32)."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)
