"""From text to a parsed schema: reference resolution, the formats, the cache of parsed schemas by id, and
the fingerprint that gives one schema one id.

- **References.** A reference names (name, subject, version); its schema is that version's, loaded from
  the store, and so on recursively. The format gets them as ``Resolved`` in dependency order (each after
  the references it uses), once each. A reference to ``-1`` means the subject's latest live version and is
  stored as that number. A reference to a soft-deleted version resolves (the version still holds its
  schema); a cycle, or a chain deeper than ``MAX_REFERENCE_DEPTH``, is an invalid schema.
- **The cache.** A schema id's text and references never change, so its parse is kept (LRU, bounded);
  only the store says whether the id still resolves.
- **Fingerprint and guid.** The fingerprint hashes the type, the canonical form and the references, so the
  same schema registered twice (under any subjects, normalized or not) gets the same id; the guid is a
  name-based UUID of the fingerprint, so every agent derives the same one without coordination.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from registry.errors import InvalidSchema
from registry.formats.base import ParsedSchema, Reference, Resolved, SchemaFormat, SchemaType
from storage.metadata.schema_store import NewSchema, SchemaRef, SchemaStore, StoredSchema

MAX_REFERENCE_DEPTH = 32
# Name-based UUIDs (RFC 9562, version 5) of fingerprints live in this namespace.
_GUID_NAMESPACE = uuid.UUID("5f0b7d8e-2c43-4a57-9c1e-6d1b3e0a9f21")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A schema a request gives, parsed, with what the store keeps of it."""

    parsed: ParsedSchema
    new: NewSchema

    @property
    def references(self) -> tuple[Reference, ...]:
        return tuple(Reference(r.name, r.subject, r.version) for r in self.new.references)


def fingerprint(schema_type: str, canonical: str, references: Sequence[SchemaRef]) -> str:
    body = json.dumps(
        [schema_type, canonical, [[r.name, r.subject, r.version] for r in references]],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(body.encode()).hexdigest()


def guid(fingerprint_: str) -> str:
    return str(uuid.uuid5(_GUID_NAMESPACE, fingerprint_))


def schema_type_of(text: str) -> SchemaType:
    """A request's ``schemaType``. Raises InvalidSchema for an unknown one."""
    try:
        return SchemaType(text.upper())
    except ValueError:
        raise InvalidSchema(f"Invalid schemaType {text}") from None


class _Lru:
    """Parsed schemas by id, at most ``size``, thread-safe (the service runs in worker threads)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[int, ParsedSchema] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: int) -> ParsedSchema | None:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, key: int, item: ParsedSchema) -> None:
        with self._lock:
            self._items[key] = item
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


class SchemaParser:
    def __init__(
        self, store: SchemaStore, formats: Mapping[SchemaType, SchemaFormat], cache_size: int
    ) -> None:
        self._store = store
        self._formats = formats  # not copied: a lazy mapping imports a format on its first lookup
        self._cache = _Lru(cache_size)

    def format(self, schema_type: SchemaType | str) -> SchemaFormat:
        try:
            fmt = self._formats.get(SchemaType(schema_type))
        except ValueError:
            fmt = None
        if fmt is None:
            raise InvalidSchema(f"Invalid schemaType {schema_type}: no format reads it here")
        return fmt

    def candidate(
        self, text: str, schema_type: SchemaType, references: Sequence[Reference], normalize: bool
    ) -> Candidate:
        """Parse a request's schema (InvalidSchema if it does not parse or a reference does not resolve)."""
        if not text.strip():
            raise InvalidSchema("Empty schema")
        names = [r.name for r in references]
        if len(set(names)) != len(names):
            raise InvalidSchema(f"Invalid {schema_type} references: a name is given twice in {names}")
        refs = tuple(self._concrete(r) for r in references)
        parsed = self.format(schema_type).parse(text, self._resolve(refs, ()))
        canonical = parsed.canonical()
        fp = fingerprint(schema_type, canonical, refs)
        stored_text = canonical if normalize else parsed.text
        return Candidate(parsed, NewSchema(str(schema_type), stored_text, canonical, fp, guid(fp), refs))

    def cached(self, schema_id: int) -> ParsedSchema | None:
        return self._cache.get(schema_id)

    def parsed(self, stored: StoredSchema) -> ParsedSchema:
        """The stored schema, parsed with its references (cached by id)."""
        hit = self._cache.get(stored.schema_id)
        if hit is not None:
            return hit
        parsed = self.format(stored.schema_type).parse(stored.text, self._resolve(stored.references, ()))
        self._cache.put(stored.schema_id, parsed)
        return parsed

    def _concrete(self, ref: Reference) -> SchemaRef:
        if ref.version != -1:
            return SchemaRef(ref.name, ref.subject, ref.version)
        latest = self._store.subject_version(ref.subject, None)
        if latest is None:
            raise InvalidSchema(f"Invalid reference {ref.name}: subject {ref.subject!r} has no live version")
        return SchemaRef(ref.name, ref.subject, latest.version)

    def _resolve(self, refs: Sequence[SchemaRef], path: tuple[tuple[str, int], ...]) -> list[Resolved]:
        """``refs`` and everything they reference, loaded, in dependency order, each once. ``path`` is the
        chain of versions being resolved, to refuse cycles."""
        out: dict[Resolved, None] = {}  # insertion-ordered set
        for ref in refs:
            key = (ref.subject, ref.version)
            if key in path or len(path) >= MAX_REFERENCE_DEPTH:
                raise InvalidSchema(
                    f"Invalid reference {ref.name}: the references form a cycle or a chain too deep"
                )
            row = self._store.subject_version(ref.subject, ref.version, include_deleted=True)
            if row is None:
                raise InvalidSchema(
                    f"Invalid reference {ref.name}: subject {ref.subject!r} has no version {ref.version}"
                )
            for dep in self._resolve(row.schema.references, (*path, key)):
                out.setdefault(dep)
            out.setdefault(Resolved(ref.name, SchemaType(row.schema.schema_type), row.schema.text))
        return list(out)
