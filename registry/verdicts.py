"""What validation on produce answers and what its callers hold, without the schema formats: the fields a
topic validates (``FieldRule``), a refusal (``RecordRefused``), an answer that needs the metadata store
(``Unresolved``), an attempt's counts (``Tally``), and the validator as the doors see it
(``SchemaValidator``), built on first use (``LazyValidator``).

The doors import this module only. The validator itself (registry/validate.py) loads the schema formats'
libraries (fastavro, Apache Avro, jsonschema, protobuf, grpcio-tools' protoc): about 17 MiB of an agent's
resident set and a third of a second, which an agent whose topics validate nothing never pays.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from storage.topic_config import KEY, VALUE, TopicConfig

Buffer = bytes | bytearray | memoryview


class FieldRule(NamedTuple):
    """One field a topic validates: ``strategy`` a short strategy name; ``payload`` the payload level. A
    tuple: one is made per validated partition of a request, and a frozen dataclass costs several times
    as much to build."""

    field: str
    strategy: str
    payload: bool


def rules_of(config: TopicConfig) -> tuple[FieldRule, ...]:
    """The fields ``config`` validates, key first; empty when validation is off."""
    out = []
    if config.key_schema_validation:
        out.append(FieldRule(KEY, config.key_subject_strategy, config.key_validation_level == "payload"))
    if config.value_schema_validation:
        out.append(
            FieldRule(VALUE, config.value_subject_strategy, config.value_validation_level == "payload")
        )
    return tuple(out)


class RecordRefused(Exception):
    """A record fails validation: ``index`` in its batch, ``reason`` without the record's number."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"record {index}: {reason}")
        self.index = index
        self.reason = reason
        self.message = f"record {index}: {reason}"


class Tally:
    """What one attempt checked, by (topic, field, result): recorded (``RecordValidator.record``) once the
    attempt is decided, so that an attempt that raised Unresolved and ran again is counted once."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str, str], int] = {}

    def add(self, topic: str, field: str, result: str, records: int) -> None:
        if records:
            key = (topic, field, result)
            self.counts[key] = self.counts.get(key, 0) + records


class ValidationMetrics(Protocol):
    def schema_validated(self, topic: str, field: str, result: str, records: int) -> None:
        """``records`` of ``topic`` checked for ``field``: result "valid", "null" (passed, no schema) or
        "invalid" (the record that failed its batch)."""
        ...


class Unresolved(Exception):
    """The answer needs the metadata store: check again with ``load=True``, off the event loop."""


class SchemaValidator(Protocol):
    def check(
        self,
        topic: str,
        rules: Sequence[FieldRule],
        buf: Buffer,
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
        when ``load`` is False (on the event loop) and the answer needs the metadata store."""
        ...

    def record(self, tally: Tally) -> None:
        """Count a decided attempt's records in the metrics."""
        ...


class LazyValidator:
    """A ``SchemaValidator`` that builds the real one (``build``) on its first check off the event loop:
    a check on the loop before that raises Unresolved, so the import runs in the thread that checks
    again, never on the loop. Thread-safe."""

    def __init__(self, build: Callable[[], SchemaValidator]) -> None:
        self._build = build
        self._built: SchemaValidator | None = None
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        return self._built is not None

    def _validator(self, load: bool) -> SchemaValidator:
        validator = self._built
        if validator is not None:
            return validator
        if not load:
            raise Unresolved("the schema validator is not loaded yet")
        with self._lock:
            if self._built is None:
                self._built = self._build()
            return self._built

    def check(
        self,
        topic: str,
        rules: Sequence[FieldRule],
        buf: Buffer,
        start: int,
        end: int,
        count: int,
        last_delta: int,
        *,
        load: bool,
        tally: Tally,
    ) -> None:
        self._validator(load).check(topic, rules, buf, start, end, count, last_delta, load=load, tally=tally)

    def record(self, tally: Tally) -> None:
        if self._built is not None:
            self._built.record(tally)
