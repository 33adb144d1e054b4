"""The produce request body, parsed and checked in one pass of compiled code.

``POST /v1/topics/{t}/records`` is the hot path of the HTTP door. FastAPI's default handling of a model body
is ``json.loads`` (Python objects for every field), then pydantic building a ``RecordIn`` model per record,
then a Python loop converting models to the agent's records: a large share of the agent's CPU under load
(docs/benchmarks.md). Here pydantic-core parses the JSON bytes and checks them against TypedDicts in Rust
(``TypeAdapter.validate_json``: no ``json.loads``, no model per record), several times faster per body. The
rules are ``api.models.ProduceIn``'s, which stays the schema OpenAPI documents: strict types, no unknown
fields, at least one record, partition and timestamp ranges, and the same error answers (``40001`` for a body
that is not JSON, ``42206`` naming the offending fields).

A **typed** body (``value_schema_id`` or ``value_subject``, the same for keys: JSON values that the agent
encodes with a registered schema, api/typed_produce.py) fails the strict check on its extra fields, and
only then is read again against ``_TypedBody``: the common body pays nothing for typed values.

The body's bytes, the parsed dicts and the records are dropped by the handler once the agent has encoded
them, before the request waits for its flush: while it waits, only the encoded batches (counted by the
produce buffer) stay referenced.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Literal, NotRequired

from pydantic import (
    ConfigDict,
    Field,
    JsonValue,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
    with_config,
)
from pydantic_core import ErrorDetails
from typing_extensions import TypedDict

from agents.encode import ProduceRecord
from api.models import MAX_TIMESTAMP, Encoding, decode_field, describe_errors, header_name
from storage import records
from storage.errors import BadRequest, InvalidPayload
from storage.topic_config import MAX_PARTITIONS

_STRICT = ConfigDict(extra="forbid", strict=True)


@with_config(_STRICT)
class _Header(TypedDict):
    name: StrictStr
    value: NotRequired[StrictStr | None]


@with_config(_STRICT)
class _Record(TypedDict):
    key: NotRequired[StrictStr | None]
    value: NotRequired[StrictStr | None]
    headers: NotRequired[list[_Header]]
    partition: NotRequired[Annotated[StrictInt, Field(ge=0, le=MAX_PARTITIONS)] | None]
    timestamp: NotRequired[Annotated[StrictInt, Field(ge=0, le=MAX_TIMESTAMP)] | None]


@with_config(_STRICT)
class _Body(TypedDict):
    records: Annotated[list[_Record], Field(min_length=1)]
    encoding: NotRequired[Literal["utf8", "base64"]]


_BODY = TypeAdapter(_Body)

_SchemaId = Annotated[StrictInt, Field(ge=1, le=2**31 - 1)]
_Version = Annotated[StrictInt, Field(ge=-1, le=2**31 - 1)] | Literal["latest"]


@with_config(_STRICT)
class TypedRecord(TypedDict):
    """A record of a typed body: a typed key or value is any JSON value (null stays null: no key, or a
    tombstone); an untyped one is text in the body's encoding, as in ``_Record``."""

    key: NotRequired[JsonValue]
    value: NotRequired[JsonValue]
    headers: NotRequired[list[_Header]]
    partition: NotRequired[Annotated[StrictInt, Field(ge=0, le=MAX_PARTITIONS)] | None]
    timestamp: NotRequired[Annotated[StrictInt, Field(ge=0, le=MAX_TIMESTAMP)] | None]


@with_config(_STRICT)
class TypedBody(TypedDict):
    """A produce body with typed keys or values, in the style of Confluent's REST Proxy v2: a schema by
    id, or by subject and version (the latest by default), per field; null is the same as absent."""

    records: Annotated[list[TypedRecord], Field(min_length=1)]
    encoding: NotRequired[Literal["utf8", "base64"]]
    key_schema_id: NotRequired[_SchemaId | None]
    key_subject: NotRequired[StrictStr | None]
    key_schema_version: NotRequired[_Version | None]
    value_schema_id: NotRequired[_SchemaId | None]
    value_subject: NotRequired[StrictStr | None]
    value_schema_version: NotRequired[_Version | None]


TYPED_FIELDS = frozenset(TypedBody.__annotations__) - frozenset(_Body.__annotations__)
_TYPED = TypeAdapter(TypedBody)


class TypedRecords:
    """A typed body as parsed: its records are encoded with their schemas off the event loop, since the
    schemas are read from the metadata store (api/typed_produce.py)."""

    __slots__ = ("body",)

    def __init__(self, body: TypedBody) -> None:
        self.body = body

    def __len__(self) -> int:
        return len(self.body["records"])


def is_json(content_type: str | None) -> bool:
    """FastAPI's rule for a body it parses as JSON: ``application/json`` or ``application/*+json``."""
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    kind, _, subtype = media.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


class TextRecords:
    """A body's records as parsed, utf8-encoded and read by pydantic-core's strict parser: their strings
    are valid Unicode (that parser refuses lone surrogates), so turning them into records cannot fail, and
    the agent may encode them as they are (``RequestEncoder.encode_text``) or through ``records()``."""

    __slots__ = ("items",)

    def __init__(self, items: list[_Record]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def records(self) -> list[ProduceRecord]:
        return _records(self.items, "utf8")


def parse_produce_request(
    raw: bytes, content_type: str | None
) -> list[ProduceRecord] | TextRecords | TypedRecords:
    """``parse_produce_body``, leaving the records of a utf8 body that the strict parser read as text,
    and a typed body's records to encode with their schemas."""
    if not is_json(content_type):
        raise InvalidPayload("body: send the records as JSON (Content-Type: application/json)")
    if not raw.strip():
        raise InvalidPayload("body: Field required")  # what FastAPI answered for a missing body
    try:
        body = _BODY.validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if not any(e["type"] in ("json_invalid", "json_type") for e in errors):
            if _names_typed_fields(errors):
                return _typed(lambda: _TYPED.validate_json(raw))
            raise InvalidPayload(describe_errors(errors)) from None  # type: ignore[arg-type]
        lenient = _lenient(raw)
        if isinstance(lenient, TypedRecords):
            return lenient
        return _records(lenient["records"], lenient.get("encoding", "utf8"))
    encoding = body.get("encoding", "utf8")
    if encoding == "utf8":
        return TextRecords(body["records"])
    return _records(body["records"], encoding)


def parse_produce_body(raw: bytes, content_type: str | None) -> list[ProduceRecord]:
    """The body's records; BadRequest (40001) if it is not JSON, InvalidPayload (42206) if it is JSON of
    the wrong shape or a key, value or header is not valid in the body's encoding, or is not sent as
    JSON at all (as FastAPI answers a model body of another content type)."""
    parsed = parse_produce_request(raw, content_type)
    if isinstance(parsed, TypedRecords):
        raise InvalidPayload("body: typed keys and values are encoded by the produce route only")
    return parsed.records() if isinstance(parsed, TextRecords) else parsed


def _names_typed_fields(errors: list[ErrorDetails]) -> bool:
    """Whether the strict check refused a field of a typed body (``value_schema_id``, ...)."""
    return any(e["type"] == "extra_forbidden" and e["loc"] and e["loc"][0] in TYPED_FIELDS for e in errors)


def _typed(validate: Callable[[], TypedBody]) -> TypedRecords:
    try:
        return TypedRecords(validate())
    except ValidationError as exc:
        raise InvalidPayload(describe_errors(exc.errors(include_url=False))) from None  # type: ignore[arg-type]


def _lenient(raw: bytes) -> _Body | TypedRecords:
    """What Python's json module accepts and pydantic-core's parser does not (lone surrogates such as
    "\\ud800", NaN): parsed the slow way, so that such a body gets the answer it always got (42206
    naming the field, or 40001), not a different one. Only bodies that are wrong take this path."""
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise BadRequest("request body is not valid JSON") from None
    try:
        return _BODY.validate_python(parsed)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if _names_typed_fields(errors):
            return _typed(lambda: _TYPED.validate_python(parsed))
        raise InvalidPayload(describe_errors(errors)) from None  # type: ignore[arg-type]


def _records(items: list[_Record], encoding: Encoding) -> list[ProduceRecord]:
    # One call per record field: field names for error messages are built only on error.
    out = []
    for i, rec in enumerate(items):
        headers: tuple[records.Header, ...] = ()
        given = rec.get("headers")
        if given:
            headers = tuple(
                records.Header(
                    header_name(h["name"], i, j), decode_field(h.get("value"), encoding, i, "value", j)
                )
                for j, h in enumerate(given)
            )
        out.append(
            ProduceRecord(
                key=decode_field(rec.get("key"), encoding, i, "key"),
                value=decode_field(rec.get("value"), encoding, i, "value"),
                headers=headers,
                partition=rec.get("partition"),
                timestamp=rec.get("timestamp"),
            )
        )
    return out
