"""Protobuf payloads: a record's bytes decoded with its schema, and JSON to and from messages, sans IO.

protobuf's own runtime does the work: a message class is built from the schema's private descriptor pool
(``message_factory.GetMessageClass``, which caches it on the descriptor), ``FromString`` decodes, and
``json_format`` speaks protobuf's canonical JSON mapping, the one Confluent's REST Proxy uses for
Protobuf values. ``framed`` bytes are what follows the magic byte and the schema id in Confluent's wire
format: the message indexes (``protobuf_wire``), then the message.

Every failure on client bytes or a client value is ``InvalidPayload``, whatever protobuf raised.
"""

from __future__ import annotations

from typing import Any, cast

from google.protobuf import json_format, message_factory
from google.protobuf.message import DecodeError, EncodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet

from registry.formats.payload import InvalidPayload
from registry.formats.protobuf import ProtobufSchema
from registry.formats.protobuf_wire import read_message_indexes, write_message_indexes


def message_class(schema: ProtobufSchema, full_name: str) -> type[Message]:
    try:
        descriptor = schema.pool.FindMessageTypeByName(full_name)
    except KeyError:
        raise InvalidPayload(f"the schema declares no message {full_name}") from None
    return message_factory.GetMessageClass(descriptor)


def decode(schema: ProtobufSchema, full_name: str, payload: bytes, *, strict: bool = False) -> Message:
    """``payload`` as a ``full_name`` message. Decoding reads every byte or fails. ``strict`` also refuses
    fields the schema does not declare (protobuf keeps them as unknown fields otherwise)."""
    try:
        decoded = message_class(schema, full_name).FromString(payload)
    except DecodeError as exc:
        raise InvalidPayload(f"not a {full_name} message: {exc}") from None
    if strict:
        _refuse_unknown(decoded)
    return decoded


def decode_framed(schema: ProtobufSchema, framed: bytes, *, strict: bool = False) -> tuple[str, Message]:
    """The message indexes at the start of ``framed``, then the message they name."""
    indexes, used = read_message_indexes(framed)
    name = schema.message_name(indexes)
    return name, decode(schema, name, framed[used:], strict=strict)


def to_json(decoded: Message, schema: ProtobufSchema) -> object:
    """A message as protobuf's JSON mapping: an object with field names in lowerCamelCase (as
    ``json_name`` says), or what a well-known type maps to (a Timestamp is a string). ``InvalidPayload``
    when the message has no JSON form."""
    try:
        value: object = json_format.MessageToDict(decoded, descriptor_pool=schema.pool)
    except (json_format.Error, TypeError, ValueError) as exc:
        # A message the wire format holds and JSON cannot: a Timestamp or Duration out of JSON's range
        # (json_format.Error), an Any of a type the pool does not know (TypeError).
        raise InvalidPayload(f"{decoded.DESCRIPTOR.full_name} has no JSON form: {exc}") from None
    return value


def from_json(schema: ProtobufSchema, full_name: str, value: object) -> Message:
    """A JSON value (decoded: dicts, lists, strings, numbers) as a ``full_name`` message: an object, but
    for the well-known types that JSON writes otherwise (a Timestamp is a string, a Value anything)."""
    built = message_class(schema, full_name)()
    well_known = built.DESCRIPTOR.file.name.startswith("google/protobuf/")
    if not isinstance(value, dict) and not well_known:
        raise InvalidPayload(f"a {full_name} message is a JSON object, not {type(value).__name__}")
    try:
        # Typed for an object; the parser takes any JSON value, as the well-known types need.
        json_format.ParseDict(cast("dict[str, Any]", value), built, descriptor_pool=schema.pool)
    except (json_format.ParseError, TypeError, ValueError) as exc:
        # ParseError for a value that does not fit; TypeError or ValueError from a well-known type's
        # parser given the wrong JSON type.
        raise InvalidPayload(f"not a {full_name} message: {exc}") from None
    return built


def encode_framed(schema: ProtobufSchema, full_name: str, value: object) -> bytes:
    """A JSON value encoded as Confluent frames it after the schema id: indexes, then the message."""
    built = from_json(schema, full_name, value)
    try:
        payload = built.SerializeToString()
    except EncodeError as exc:
        # A proto2 message without one of its required fields.
        raise InvalidPayload(f"not a complete {full_name} message: {exc}") from None
    try:
        indexes = schema.message_indexes(full_name)
    except KeyError:
        raise InvalidPayload(f"{full_name} is not declared in the schema's own file") from None
    return write_message_indexes(indexes) + payload


def _refuse_unknown(decoded: Message) -> None:
    """Unknown fields anywhere in ``decoded``, nested messages included."""
    unknown = UnknownFieldSet(decoded)
    if len(unknown):
        numbers = sorted({unknown[i].field_number for i in range(len(unknown))})
        raise InvalidPayload(f"{decoded.DESCRIPTOR.full_name} has undeclared field(s) {numbers}")
    for field, value in decoded.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            items = value.values() if field.message_type.fields_by_name["value"].message_type else []
        elif isinstance(value, Message):
            items = [value]
        else:
            items = list(value)
        for item in items:
            _refuse_unknown(item)
