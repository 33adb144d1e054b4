"""Validation on produce: every record's key or value names, in Confluent's framing (registry/framing.py), a
schema registered under the subject the topic's strategy names; at ``payload`` level it also decodes with
that schema and uses every byte. Both doors call it, through registry/verdicts.py's ``SchemaValidator``:
the Kafka door per batch of a Produce request (broker/batches.py), the HTTP door per request
(api/schema_checks.py).

The rules, per field the topic validates (``confluent.{key,value}.schema.validation``):
1. a null field passes (Confluent Server lets tombstones through, and a null key);
2. the field starts with magic byte 0 and a 4-byte id, or the record holds a ``__key_schema_id`` /
   ``__value_schema_id`` header with magic byte 1 and a 16-byte GUID; anything else fails;
3. the id (or GUID) must be registered, and be a version of the subject the strategy names, soft-deleted
   versions included: TopicNameStrategy ``{topic}-{key|value}``; RecordNameStrategy the record's name:
   an Avro schema's full name, the full name of the Protobuf message the message indexes point at, a JSON
   schema's ``title``; TopicRecordNameStrategy ``{topic}-{record name}``;
4. a Protobuf schema's message indexes must parse and point at a message, whatever the strategy;
5. at ``payload`` level (``strata.{key,value}.schema.validation.level``) the payload decodes with the
   schema and uses every byte: Avro's binary decoding, JSON parsed and validated, a Protobuf message of the
   indexed type (protobuf reads every byte or fails).

The first failing record fails the whole check with ``RecordRefused`` (registry/verdicts.py: its index in
the batch and the reason, as ``record 3: schema id 17 is not registered under subject orders-value``);
when both fields are checked, the lower index wins.

Cost: the records are read by the C walk of ``framing.scan``, which at ``id`` level gives one ``Ref`` per
run of records naming the same schema the same way, so a batch of one schema is one cache lookup and one
verdict, whatever its size; ``payload`` level decodes every record in Python. The facts come from a
``SchemaCache`` (registry/schema_cache.py), whose IO is behind its lookup; ``load=False`` (the event loop)
raises ``Unresolved`` instead of reading. Message indexes are measured only for topics that carried
Protobuf lately (``_indexed``), since measuring them splits an Avro batch's runs.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Protocol

from registry import framing
from registry.formats import protobuf_payload
from registry.formats.avro import AvroSchema
from registry.formats.base import ParsedSchema
from registry.formats.jsonschema import JsonSchema
from registry.formats.payload import InvalidPayload
from registry.formats.protobuf import ProtobufSchema
from registry.framing import Bad, Kind, Ref
from registry.schema_cache import CacheMetrics, Schema, SchemaCache, StoreLookup
from registry.service import default_formats
from registry.verdicts import FieldRule, RecordRefused, Tally, ValidationMetrics
from storage.metadata.schema_store import SchemaStore

RECORD_NAME, TOPIC_NAME, TOPIC_RECORD_NAME = (
    "RecordNameStrategy",
    "TopicNameStrategy",
    "TopicRecordNameStrategy",
)
# Message names by (schema id, index bytes), and passed verdicts, kept at most: what they are keyed by is a
# client's choice.
_MESSAGE_NAMES = 4096
_VERDICTS = 4096


def subject_for(strategy: str, topic: str, field: str, record: str | None) -> str | None:
    """The subject ``strategy`` names; None when it needs a record name and there is none."""
    if strategy == TOPIC_NAME:
        return f"{topic}-{field}"
    if record is None:
        return None
    return record if strategy == RECORD_NAME else f"{topic}-{record}"


def record_name(schema: ParsedSchema, message: str | None) -> str | None:
    """The name RecordNameStrategy uses: the indexed Protobuf message's, else the schema's first."""
    if message is not None:
        return message
    names = schema.record_names()
    return names[0] if names else None


def payload_problem(schema: ParsedSchema, message: str | None, payload: bytes) -> str | None:
    """Why ``payload`` does not decode with ``schema`` using every byte (None when it does). ``message``:
    the Protobuf message the indexes name."""
    try:
        if isinstance(schema, AvroSchema):
            decoded = schema.codec.decode(payload)
            if not decoded.complete:
                return f"{decoded.size - decoded.consumed} bytes left after the Avro value"
        elif isinstance(schema, JsonSchema):
            schema.validate_payload(payload)
        elif isinstance(schema, ProtobufSchema) and message is not None:
            protobuf_payload.decode(schema, message, payload)
        else:
            return f"no payload decoder for a {schema.schema_type} schema"
    except InvalidPayload as exc:
        return str(exc)
    except RecursionError:
        # JSON (or a recursive Avro type) nested deeper than Python's stack: no schema accepts it here.
        return "the payload nests too deeply to decode"
    return None


class RecordValidator:
    """A ``SchemaValidator`` (registry/verdicts.py). Thread-safe, as its cache is: the Kafka door calls it
    on the event loop and in its check threads."""

    def __init__(self, cache: SchemaCache, metrics: ValidationMetrics | None = None) -> None:
        self.cache = cache
        self._metrics = metrics
        # (topic, field) whose last check met a Protobuf schema: their message indexes are measured.
        self._indexed: set[tuple[str, str]] = set()
        self._names: dict[tuple[int, bytes], str | InvalidPayload] = {}
        # Refs that passed rules 2 to 4 for a (topic, rule), and until when: the subject list they stand on
        # is fresh. A batch of a known schema then costs one lookup here and none in the cache.
        self._passed: dict[tuple[str, FieldRule, int, int | bytes, bytes | None], tuple[float, Schema]] = {}
        self._lock = threading.Lock()

    def check(
        self,
        topic: str,
        rules: Sequence[FieldRule],
        buf: bytes | bytearray | memoryview,
        start: int,
        end: int,
        count: int,
        last_delta: int,
        *,
        load: bool,
        tally: Tally,
    ) -> None:
        """Check the ``count`` records of ``buf[start:end]`` (one batch's records section, decompressed,
        that ``check_records`` passed), counting them in ``tally``. Raises RecordRefused, or Unresolved
        when ``load`` is False and the cache cannot answer."""
        failures: list[tuple[str, RecordRefused]] = []
        passed: list[tuple[str, int]] = []
        for rule in rules:
            nulls, refused = self._check_field(topic, rule, buf, start, end, count, last_delta, load)
            if refused is None:
                passed.append((rule.field, nulls))
            else:
                failures.append((rule.field, refused))
        if failures:
            field, first = min(failures, key=lambda f: f[1].index)  # the key's on a tie: it comes first
            tally.add(topic, field, "invalid", 1)
            raise first
        for field, nulls in passed:
            tally.add(topic, field, "valid", count - nulls)
            tally.add(topic, field, "null", nulls)

    def record(self, tally: Tally) -> None:
        """Count a decided attempt's records in the metrics."""
        if self._metrics is not None:
            for (topic, field, result), records in tally.counts.items():
                self._metrics.schema_validated(topic, field, result, records)

    def _check_field(
        self,
        topic: str,
        rule: FieldRule,
        buf: bytes | bytearray | memoryview,
        start: int,
        end: int,
        count: int,
        last_delta: int,
        load: bool,
    ) -> tuple[int, RecordRefused | None]:
        """(null fields, the first refusal) of one field."""
        at = (topic, rule.field)
        indexed = at in self._indexed
        refs, nulls = framing.scan(
            buf, start, end, count, last_delta, rule.field, indexes=indexed, each=rule.payload
        )
        verdicts: dict[tuple[int, int | bytes, bytes | None], tuple[Schema | None, str | None]] = {}
        protobuf = False
        for ref in refs:
            if ref.kind == Kind.BAD:
                return nulls, RecordRefused(ref.record, _bad(ref, rule.field, buf))
            key = (ref.kind, ref.ref, ref.indexes)
            if key not in verdicts:
                verdicts[key] = self._judged(topic, rule, ref, load)
            schema, reason = verdicts[key]
            if schema is not None and isinstance(schema.parsed, ProtobufSchema):
                protobuf = True
                if not indexed and ref.kind == Kind.ID:
                    # The indexes after the id were not measured: scan again, measuring them.
                    self._indexed.add(at)
                    return self._check_field(topic, rule, buf, start, end, count, last_delta, load)
            if reason is None and rule.payload and schema is not None and schema.parsed is not None:
                reason = self._payload(rule.field, ref, schema, buf)
            if reason is not None:
                return nulls, RecordRefused(ref.record, reason)
        if indexed and not protobuf and refs:
            self._indexed.discard(at)
        return nulls, None

    def _judged(self, topic: str, rule: FieldRule, ref: Ref, load: bool) -> tuple[Schema | None, str | None]:
        """``_verdict``, from the verdicts that passed while their subject lists are fresh."""
        at = (topic, rule, ref.kind, ref.ref, ref.indexes)
        now = self.cache.now()
        passed = self._passed.get(at)
        if passed is not None and now < passed[0]:
            self.cache.count("verdict", True)
            return passed[1], None
        self.cache.count("verdict", False)
        schema, reason, until = self._verdict(topic, rule, ref, load)
        if reason is None and schema is not None and until is not None:
            with self._lock:
                if len(self._passed) >= _VERDICTS:
                    self._passed.clear()
                self._passed[at] = (until, schema)
        return schema, reason

    def _verdict(
        self, topic: str, rule: FieldRule, ref: Ref, load: bool
    ) -> tuple[Schema | None, str | None, float | None]:
        """(the schema, why the ref fails rules 3 and 4 or None, until when a pass stands)."""
        if ref.kind == Kind.ID:
            assert isinstance(ref.ref, int)
            schema: Schema | None = self.cache.schema(ref.ref, load)
            named = f"schema id {ref.ref}"
        else:
            assert isinstance(ref.ref, bytes)
            guid = str(uuid.UUID(bytes=ref.ref))
            schema = self.cache.schema_by_guid(guid, load)
            if schema is None:
                return None, f"schema GUID {guid} is not registered", None
            named = f"schema id {schema.schema_id} (GUID {guid})"
        assert schema is not None
        if schema.parsed is None:
            return schema, schema.problem, None
        message: str | None = None
        if isinstance(schema.parsed, ProtobufSchema):
            found = self._message(schema.schema_id, schema.parsed, ref.indexes)
            if isinstance(found, InvalidPayload):
                return schema, f"{named}: {found}", None
            message = found
        elif ref.kind == Kind.GUID and ref.indexes:
            header = framing.HEADERS[rule.field]
            why = (
                f"header {header} has {len(ref.indexes)} bytes after the GUID of a"
                f" {schema.parsed.schema_type} schema; only a Protobuf schema's message indexes follow it"
            )
            return schema, why, None
        subject = subject_for(rule.strategy, topic, rule.field, record_name(schema.parsed, message))
        if subject is None:
            what = "title" if isinstance(schema.parsed, JsonSchema) else "record name"
            return schema, f"{named} ({schema.parsed.schema_type}) has no {what} for {rule.strategy}", None
        until = self.cache.version_until(schema.schema_id, subject, load)
        if until is None:
            return schema, f"{named} is not registered under subject {subject}", None
        return schema, None, until

    def _message(self, schema_id: int, schema: ProtobufSchema, raw: bytes | None) -> str | InvalidPayload:
        """The full name of the message ``raw`` (message indexes' bytes) point at, or why none."""
        if raw is None:
            return InvalidPayload("the message indexes after the schema id do not parse")
        with self._lock:
            known = self._names.get((schema_id, raw))
        if known is not None:
            return known
        try:
            found: str | InvalidPayload = schema.message_name(framing.parse_indexes(raw))
        except InvalidPayload as exc:
            found = exc.with_traceback(None)  # cached: its traceback would keep this frame alive
        with self._lock:
            if len(self._names) >= _MESSAGE_NAMES:
                self._names.clear()
            self._names[(schema_id, raw)] = found
        return found

    def _payload(
        self, field: str, ref: Ref, schema: Schema, buf: bytes | bytearray | memoryview
    ) -> str | None:
        parsed = schema.parsed
        assert parsed is not None
        message = None
        if isinstance(parsed, ProtobufSchema):
            found = self._message(schema.schema_id, parsed, ref.indexes)
            message = found if isinstance(found, str) else None
        start = framing.payload_start(ref, isinstance(parsed, ProtobufSchema))
        problem = payload_problem(parsed, message, bytes(memoryview(buf)[start : ref.end]))
        if problem is None:
            return None
        return f"the {field} does not decode with schema id {schema.schema_id}: {problem}"


def _bad(ref: Ref, field: str, buf: bytes | bytearray | memoryview) -> str:
    header = framing.HEADERS[field]
    if ref.ref == Bad.HEADER:
        return f"header {header} does not hold magic byte 1 and a 16-byte schema GUID"
    size = ref.end - ref.start
    if ref.ref == Bad.SHORT:
        return f"the {field} is {size} bytes, too short for magic byte 0 and a 4-byte schema id"
    return (
        f"the {field} starts with byte {memoryview(buf)[ref.start]}, not magic byte 0 of a schema id,"
        f" and has no {header} header"
    )


class ValidatorMetrics(ValidationMetrics, CacheMetrics, Protocol):
    """Both kinds of counts (agents/metrics.py's ``Metrics`` keeps them)."""


def store_validator(
    store: SchemaStore, monotonic: Callable[[], float], metrics: ValidatorMetrics | None = None
) -> RecordValidator:
    """The validator of a process: a cache over the metadata store, with the registry's formats."""
    lookup = StoreLookup(store, default_formats())
    return RecordValidator(SchemaCache(lookup, monotonic, metrics=metrics), metrics)
