"""What validation on produce knows of the registry: schemas by id and GUID, and the subjects an id is a
version of, cached in front of a small lookup interface (``SchemaLookup``, the only IO).

- **Schemas** by id, and GUIDs to ids, are kept until evicted (LRU, bounded): an id's schema never
  changes, and a GUID is derived from the schema's fingerprint, as its id is.
- **Subjects** of an id (those with a version using it, soft-deleted versions included, as Redpanda's
  ``include_deleted::yes``) are kept ``ttl_s``: a version registered or permanently deleted on another
  agent is seen within that time.
- **A negative answer is re-read before it refuses a record**: an id or GUID not found, or a subject the
  id is not a version of, is read from the store again, so that a schema registered on another agent a
  moment ago is seen. The same negative answer (the same id, GUID, or id and subject) read less than
  ``recheck_s`` ago stands without another read: a client sending bad records in a loop then costs the
  store one read per key and ``recheck_s``, not one per request.

Every method takes ``load``: False on the event loop, where a read would block every connection, so an
answer that needs the store raises ``Unresolved`` instead (the caller checks again off the loop); True in a
worker thread, which reads. Thread-safe: one lock guards the tables; reads happen outside it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from registry.errors import InvalidSchema
from registry.formats.base import ParsedSchema, SchemaFormat, SchemaType
from registry.parsing import SchemaParser
from registry.verdicts import Unresolved
from storage.metadata.schema_store import SchemaStore

# The time a subject list stays fresh: Confluent's and the research's default for verdict caches.
DEFAULT_TTL_S = 30.0
DEFAULT_RECHECK_S = 1.0
DEFAULT_SIZE = 4096

K = TypeVar("K")
V = TypeVar("V")


class SchemaLookup(Protocol):
    """The registry's facts, read from the metadata store (blocking)."""

    def schema(self, schema_id: int) -> ParsedSchema | None:
        """The id's schema, parsed; None while no version uses the id. Raises InvalidSchema if it does not
        parse (it did at registration; a format change could refuse it)."""
        ...

    def schema_id(self, guid: str) -> int | None:
        """The id of the schema with this GUID; None while no version uses it."""
        ...

    def subjects(self, schema_id: int) -> frozenset[str]:
        """The subjects with a version using the id, soft-deleted versions included."""
        ...


class CacheMetrics(Protocol):
    def schema_cache(self, cache: str, hit: bool) -> None:
        """One lookup in ``cache`` ("verdict", "schema", "guid", "subjects"), answered from memory or
        not."""
        ...


@dataclass(frozen=True, slots=True)
class Schema:
    """An id's schema as validation uses it: ``parsed``, or ``problem`` saying why there is none."""

    schema_id: int
    parsed: ParsedSchema | None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class _Entry(Generic[V]):
    value: V
    loaded: float  # the clock's monotonic time of the read


class _Lru(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, _Entry[V]] = OrderedDict()

    def get(self, key: K) -> _Entry[V] | None:
        entry = self._items.get(key)
        if entry is not None:
            self._items.move_to_end(key)
        return entry

    def put(self, key: K, entry: _Entry[V]) -> None:
        self._items[key] = entry
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


class StoreLookup:
    """``SchemaLookup`` over the metadata store, with the registry's own parse (references resolved)."""

    def __init__(
        self, store: SchemaStore, formats: Mapping[SchemaType, SchemaFormat], cache_size: int = DEFAULT_SIZE
    ) -> None:
        self._store = store
        self._parser = SchemaParser(store, formats, cache_size)

    def schema(self, schema_id: int) -> ParsedSchema | None:
        stored = self._store.schema_by_id(schema_id)
        return None if stored is None else self._parser.parsed(stored)

    def schema_id(self, guid: str) -> int | None:
        stored = self._store.schema_by_guid(guid)
        return None if stored is None else stored.schema_id

    def subjects(self, schema_id: int) -> frozenset[str]:
        return frozenset(subject for subject, _ in self._store.schema_usages(schema_id, include_deleted=True))


class SchemaCache:
    def __init__(
        self,
        lookup: SchemaLookup,
        monotonic: Callable[[], float],
        *,
        ttl_s: float = DEFAULT_TTL_S,
        recheck_s: float = DEFAULT_RECHECK_S,
        size: int = DEFAULT_SIZE,
        metrics: CacheMetrics | None = None,
    ) -> None:
        self._lookup = lookup
        self._now = monotonic
        self.ttl_s = ttl_s
        self.recheck_s = recheck_s
        self._metrics = metrics
        self._lock = threading.Lock()
        self._schemas: _Lru[int, Schema] = _Lru(size)
        self._guids: _Lru[str, int | None] = _Lru(size)
        self._subjects: _Lru[int, frozenset[str]] = _Lru(size)
        # (id, subject) pairs the store said no to, and when: the negative answers of is_version_of.
        self._refused: _Lru[tuple[int, str], None] = _Lru(size)

    def schema(self, schema_id: int, load: bool) -> Schema:
        """The id's schema; ``Schema.parsed`` is None when the id is not registered or does not parse."""
        with self._lock:
            entry = self._schemas.get(schema_id)
        if entry is not None and (entry.value.parsed is not None or self._recent(entry)):
            self.count("schema", True)
            return entry.value
        self._need(load, "schema")
        try:
            parsed = self._lookup.schema(schema_id)
        except InvalidSchema as exc:
            found = Schema(schema_id, None, f"schema id {schema_id} does not parse: {exc.message}")
        else:
            problem = None if parsed is not None else f"schema id {schema_id} is not registered"
            found = Schema(schema_id, parsed, problem)
        with self._lock:
            self._schemas.put(schema_id, _Entry(found, self._now()))
        return found

    def schema_by_guid(self, guid: str, load: bool) -> Schema | None:
        """The GUID's schema, or None when no schema has it."""
        with self._lock:
            entry = self._guids.get(guid)
        if entry is not None and (entry.value is not None or self._recent(entry)):
            self.count("guid", True)
            return None if entry.value is None else self.schema(entry.value, load)
        self._need(load, "guid")
        found = self._lookup.schema_id(guid)
        with self._lock:
            self._guids.put(guid, _Entry(found, self._now()))
        # The schema itself by id (one more read on a GUID's first use): its parse is cached by id.
        return None if found is None else self.schema(found, load)

    def version_until(self, schema_id: int, subject: str, load: bool) -> float | None:
        """Until when (the clock's monotonic time) a version of ``subject``, soft-deleted or not, is known
        to use the id; None when none does."""
        now = self._now()
        with self._lock:
            entry = self._subjects.get(schema_id)
            refused = self._refused.get((schema_id, subject))
        if entry is not None and subject in entry.value and now - entry.loaded < self.ttl_s:
            self.count("subjects", True)
            return entry.loaded + self.ttl_s
        if refused is not None and now - refused.loaded < self.recheck_s:
            self.count("subjects", True)  # this very answer was read from the store a moment ago
            return None
        self._need(load, "subjects")
        subjects = self._lookup.subjects(schema_id)
        now = self._now()
        with self._lock:
            self._subjects.put(schema_id, _Entry(subjects, now))
            if subject not in subjects:
                self._refused.put((schema_id, subject), _Entry(None, now))
        return now + self.ttl_s if subject in subjects else None

    def now(self) -> float:
        return self._now()

    def _recent(self, entry: _Entry[V]) -> bool:
        """Whether a negative answer was read so recently that it stands without another read."""
        return self._now() - entry.loaded < self.recheck_s

    def _need(self, load: bool, cache: str) -> None:
        if not load:
            raise Unresolved(f"the {cache} cache cannot answer without the metadata store")
        self.count(cache, False)

    def count(self, cache: str, hit: bool) -> None:
        """One lookup of ``cache`` in the metrics (the validator counts its verdicts here too)."""
        if self._metrics is not None:
            self._metrics.schema_cache(cache, hit)
