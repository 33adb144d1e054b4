"""Request and response bodies of the HTTP API, and the conversions between them and the agent's types.

Models are strict (no silent coercion of 1 to "1") and forbid unknown fields, so a typo in a client is a
clear 42206 rather than ignored data.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictFloat, StrictInt, StrictStr

from storage import records
from storage.errors import InvalidPayload, NotAcceptable
from storage.topic_config import MAX_PARTITIONS

MAX_OFFSET = 2**63 - 1
MAX_TIMESTAMP = 2**63 - 1
Encoding = Literal["utf8", "base64"]
# Which records a fetch returns, by Kafka's isolation levels: read_committed (the default) stops at the
# last stable offset and leaves out aborted transactions' records; read_uncommitted returns every stored
# record up to the high watermark.
Isolation = Literal["read_committed", "read_uncommitted"]
# Whether a fetch decodes keys and values framed with a registered schema's id back to JSON.
Decode = Literal["none", "schema"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class HeaderIn(_Strict):
    name: StrictStr
    value: StrictStr | None = None


class RecordIn(_Strict):
    key: StrictStr | None = None
    value: StrictStr | None = None
    headers: list[HeaderIn] = Field(default_factory=list)
    partition: Annotated[StrictInt, Field(ge=0, le=MAX_PARTITIONS)] | None = None
    timestamp: Annotated[StrictInt, Field(ge=0, le=MAX_TIMESTAMP)] | None = None


SchemaId = Annotated[StrictInt, Field(ge=1, le=2**31 - 1)]
SchemaVersion = Annotated[StrictInt, Field(ge=-1, le=2**31 - 1)] | Literal["latest"]


class ProduceIn(_Strict):
    records: list[RecordIn] = Field(min_length=1)
    encoding: Encoding = "utf8"


class TypedRecordIn(_Strict):
    # Any JSON value for a field the body names a schema for; text in the body's encoding otherwise.
    key: JsonValue = None
    value: JsonValue = None
    headers: list[HeaderIn] = Field(default_factory=list)
    partition: Annotated[StrictInt, Field(ge=0, le=MAX_PARTITIONS)] | None = None
    timestamp: Annotated[StrictInt, Field(ge=0, le=MAX_TIMESTAMP)] | None = None


class TypedProduceIn(_Strict):
    """A produce body with typed keys or values (api/typed_produce.py): the schema of each field, by id
    or by subject and version (the latest by default), and JSON values the agent encodes with it."""

    records: list[TypedRecordIn] = Field(min_length=1)
    encoding: Encoding = "utf8"
    key_schema_id: SchemaId | None = None
    key_subject: StrictStr | None = None
    key_schema_version: SchemaVersion | None = None
    value_schema_id: SchemaId | None = None
    value_subject: StrictStr | None = None
    value_schema_version: SchemaVersion | None = None


class PartitionOffset(BaseModel):
    partition: int
    offset: int


class ProduceOut(BaseModel):
    offsets: list[PartitionOffset]


ConfigValue = StrictStr | StrictInt | StrictFloat


class TopicCreate(_Strict):
    name: StrictStr
    partitions: Annotated[StrictInt, Field(ge=1, le=MAX_PARTITIONS)] = 1
    configs: dict[str, ConfigValue] = Field(default_factory=dict)


class PartitionsIncrease(_Strict):
    partitions: Annotated[StrictInt, Field(ge=1, le=MAX_PARTITIONS, description="the new, larger count")]


class TopicConfigsPatch(_Strict):
    configs: dict[str, ConfigValue | None]


class PartitionInfo(BaseModel):
    partition: int
    log_start_offset: int
    high_watermark: int
    # Below it every Kafka transaction has ended: read_committed readers stop here (the high watermark
    # when no transaction is open).
    last_stable_offset: int | None = None
    cleaned_offset: int = 0
    dirty_ratio: float = 0.0
    live_bytes: int = 0
    last_compaction_ms: int | None = None


class LevelInfo(BaseModel):
    level: int
    files: int
    bytes: int


class TopicOut(BaseModel):
    name: str
    configs: dict[str, str]
    partitions: list[PartitionInfo]
    levels: list[LevelInfo] = Field(default_factory=list)


class PlannedJob(BaseModel):
    job_id: int
    kind: str
    reason: str


class CompactOut(BaseModel):
    topic: str
    planned: list[PlannedJob]


class HeaderOut(BaseModel):
    name: str
    value: str | None


class SchemaRefOut(BaseModel):
    """The registered schema a decoded key or value was written with (``decode=schema``)."""

    id: int
    type: str
    subject: str | None
    version: int | None


class RecordOut(BaseModel):
    offset: int
    # Text in the fetch's encoding; with decode=schema, a field that decodes is its JSON value.
    key: JsonValue
    value: JsonValue
    headers: list[HeaderOut]
    timestamp: int
    key_schema: SchemaRefOut | None = None
    value_schema: SchemaRefOut | None = None
    key_decode_error: str | None = None
    value_decode_error: str | None = None


class FetchOut(BaseModel):
    records: list[RecordOut]
    next_offset: int
    high_watermark: int
    log_start_offset: int
    # Below it, every transaction has ended (Kafka's LSO): a read_committed fetch stops there.
    last_stable_offset: int


class OffsetsOut(BaseModel):
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int


class GroupOffsetIn(_Strict):
    topic: StrictStr
    partition: Annotated[StrictInt, Field(ge=0, le=MAX_PARTITIONS)]
    offset: Annotated[StrictInt, Field(ge=0, le=MAX_OFFSET)]


class GroupOffsetsIn(_Strict):
    offsets: list[GroupOffsetIn] = Field(min_length=1, max_length=10_000)


class GroupOffsetOut(BaseModel):
    topic: str
    partition: int
    offset: int


class GroupOffsetsOut(BaseModel):
    group: str
    offsets: list[GroupOffsetOut]


class DamagedRangeOut(BaseModel):
    """Offsets of a partition whose stored bytes fail their checks (error 50002)."""

    topic: str
    partition: int
    first_offset: int
    last_offset: int
    object_key: str


class ErrorOut(BaseModel):
    error_code: int
    message: str
    damaged: DamagedRangeOut | None = None
    # 42220: the index of the produce request's record that failed schema validation.
    record: int | None = None


def decode_field(
    text: str | None, encoding: Encoding, i: int, name: str, header: int | None = None
) -> bytes | None:
    """The bytes of record ``i``'s key, value or header value (the field is named only if it is wrong)."""
    if text is None:
        return None
    if encoding == "utf8":
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            # JSON can carry lone surrogates ("\ud800") that have no UTF-8 form.
            raise InvalidPayload(f"{_field(i, header, name)} is not valid Unicode text") from None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidPayload(f"{_field(i, header, name)} is not valid base64") from None


def _field(i: int, header: int | None, name: str) -> str:
    return f"records[{i}].{name}" if header is None else f"records[{i}].headers[{header}].{name}"


def header_name(name: str, i: int, j: int) -> str:
    decode_field(name, "utf8", i, "name", j)  # header names are UTF-8 in the record format
    return name


def describe_errors(errors: list[dict[str, object]]) -> str:
    """Validation errors as one line: the first five, each as ``location: message``."""
    parts = []
    for err in errors[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")  # type: ignore[attr-defined]
        parts.append(f"{loc or 'body'}: {err.get('msg')}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(parts) + more


def _encode(data: bytes | None, encoding: Encoding, offset: int) -> str | None:
    if data is None:
        return None
    if encoding == "base64":
        return base64.b64encode(data).decode("ascii")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotAcceptable(
            f"the record at offset {offset} is not valid UTF-8; fetch with encoding=base64"
        ) from None


def record_out(record: records.Record, encoding: Encoding) -> dict[str, object]:
    """A plain dict (not a model): fetch responses are serialised straight to JSON with orjson."""
    return {
        "offset": record.offset,
        "key": _encode(record.key, encoding, record.offset),
        "value": _encode(record.value, encoding, record.offset),
        "headers": [
            {"name": h.key, "value": _encode(h.value, encoding, record.offset)} for h in record.headers
        ],
        "timestamp": record.timestamp,
    }
