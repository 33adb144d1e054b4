"""The JSON Schema compatibility checker's vocabulary: a difference found, and a subschema placed in its
document (its resolver, for ``$ref``) with what its whole schema shares (draft, validator)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import referencing
from jsonschema.protocols import Validator

from registry.formats.jsonschema_keywords import ASSERTIONS, in_scope

if TYPE_CHECKING:
    # The resolver class, public through its instances (Registry.resolver) but not exported by name.
    from referencing._core import Resolver


@dataclass(frozen=True, slots=True)
class Difference:
    rule: str
    path: str
    detail: str

    def __str__(self) -> str:
        return f"{self.rule} at {self.path}: {self.detail}"


@dataclass(frozen=True, slots=True)
class Side:
    """What every node of one schema shares: its root validator (evolved per subschema to validate
    values) and whether ``$ref`` replaces its siblings (drafts 4, 6 and 7)."""

    validator: Validator
    spec: referencing.Specification[Any]
    ref_replaces_siblings: bool
    # The assertions this draft defines: another draft's keyword is ignored by this draft's validator
    # (and its metaschema never checked its shape), so the checker ignores it too.
    known: frozenset[str]


@dataclass(frozen=True, slots=True)
class Node:
    """A subschema with the resolver of its place in its document."""

    schema: Any
    resolver: Resolver[Any]
    side: Side
    # A reader's or writer's base taken from a schema with in-place applicators (allOf, $ref, ...).
    applied: bool = False

    def child(self, schema: Any) -> Node:
        return Node(schema, in_scope(self.resolver, schema, self.side.spec), self.side)

    def keywords(self) -> set[str]:
        """The keywords that count in this draft: its assertions and every annotation."""
        if not isinstance(self.schema, dict):
            return set()
        return {k for k in self.schema if k not in ASSERTIONS or k in self.side.known}

    def get(self, key: str) -> Any:
        if not isinstance(self.schema, dict) or (key in ASSERTIONS and key not in self.side.known):
            return None
        return self.schema.get(key)

    def sub(self, key: str, default: Any = True) -> Node:
        value = self.get(key)
        return self.child(default if value is None else value)

    def additional(self, keyword: str) -> Node:
        """The schema for what a content model does not name: ``additionalProperties`` (or the items past
        the positions), else ``unevaluatedProperties`` (``unevaluatedItems``) where nothing else
        evaluates, else anything."""
        unevaluated = "unevaluatedProperties" if keyword == "additionalProperties" else "unevaluatedItems"
        if self.get(keyword) is None and self.get(unevaluated) is not None and not self.applied:
            return self.sub(unevaluated)
        return self.sub(keyword)

    @property
    def trivial(self) -> bool:
        """Accepts every value: ``true``, or an object without assertions."""
        return self.schema is True or (isinstance(self.schema, dict) and not ASSERTIONS & self.keywords())

    @property
    def false(self) -> bool:
        return self.schema is False


@dataclass(frozen=True, slots=True)
class Parts:
    base: Node
    alls: list[tuple[str, Node]]
    sums: list[tuple[str, list[Node]]]
    nots: list[Node]
