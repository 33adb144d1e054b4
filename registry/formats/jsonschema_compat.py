"""JSON Schema compatibility: can a reader schema accept every value a writer schema accepts? Sans IO.

No library answers this, so the registry has its own checker. It follows the rules of Confluent's JSON Schema
provider, whose difference names (``TYPE_NARROWED``, ``PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL``, ...) the
messages use, and Karapace's checks served as the checklist. Each message reads ``RULE at #/json/path:
detail``, the path into the reader's schema.

**The rule.** ``compare(reader, writer)`` lists why some value valid under the writer may be invalid under the
reader; empty means compatible. BACKWARD checks the new schema as reader and the old one as writer. The
check is conservative: when it cannot show that the reader covers the writer, it reports a difference.

**How.** A schema is a conjunction: its plain keywords (the "base"), each ``allOf`` member, each
``anyOf``/``oneOf`` (a disjunction), each ``not``, and, from draft 2019-09, a ``$ref`` beside other
keywords (before, a ``$ref`` replaces its siblings). The reader is taken apart first: the writer must fit
every reader conjunct. A reader disjunction is covered when the whole writer fits one branch, or each
writer branch fits some reader branch (``oneOf`` counts as ``anyOf``, as in Confluent's and Karapace's
checks: overlapping branches are not detected). A reader ``not`` is covered when the writer excludes at
least what it excludes. The base is compared keyword group by keyword group (``jsonschema_compat_types``),
each only for the types the writer can produce; when the writer itself is combined, its base, its
``allOf`` members and its branches are tried in turn.

**Finite writers.** When the writer's values can be listed (``enum``, ``const``, or only ``null`` and
``boolean``), each value the writer accepts is validated against the reader with jsonschema itself: exact.

**References** resolve through each side's ``referencing`` registry; a pair already being compared is
assumed compatible (recursive schemas), and a budget of comparisons bounds the work on adversarial
schemas (beyond it the answer is "too complex", an incompatibility).

**Keywords** outside every draft's vocabulary are annotations (no validator looks at them, so they cannot
change which values are valid) and so are ``title``, ``description``, ``default`` and the like. Assertions
the checker does not analyse (``if``/``then``/``else``, ``unevaluated*``, dynamic references) must be
identical in the reader, or the difference is reported with the keyword's path.

One departure from a pure "every value" reading, taken from Confluent: a property the reader newly requires
is compatible when the reader gives it a ``default``. Where Confluent's verdicts depart from validation the
other way, the checker follows validation: a newly required property that the reader does not declare is
incompatible, and ``additionalItems`` beside an ``items`` that is not a list changes nothing (validators
ignore it there).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import referencing
import referencing.exceptions
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator

from registry.formats import jsonschema_compat_types as types
from registry.formats.jsonschema_compat_objects import objects
from registry.formats.jsonschema_keywords import ASSERTIONS, UNANALYSED, in_scope
from registry.formats.jsonschema_nodes import Difference, Node, Parts, Side

if TYPE_CHECKING:
    from registry.formats.jsonschema import JsonSchema

BUDGET = 20_000
# The rule a finite writer's value breaks, by the reader keyword that refuses it; others are KEYWORD_NARROWED.
_VALUE_RULES = {"enum": "ENUM_ARRAY_NARROWED", "const": "ENUM_ARRAY_CHANGED", "type": "TYPE_CHANGED"}
_COMBINATORS = ("allOf", "anyOf", "oneOf", "not", "$ref")
# Keywords that make a writer's base and one of its combined members unsafe to merge into one object:
# their meaning depends on sibling keywords (``additionalItems`` on ``items``) or on evaluation order.
# In-place applicators: beside them, ``unevaluated*`` also sees what they evaluated, which the checker
# does not follow.
_IN_PLACE = frozenset(
    {
        "allOf",
        "anyOf",
        "oneOf",
        "$ref",
        "$dynamicRef",
        "$recursiveRef",
        "if",
        "dependentSchemas",
        "dependencies",
    }
)
_NO_MERGE = frozenset(
    {"$ref", "$dynamicRef", "$recursiveRef", "$id", "id", "additionalItems", "if", "then", "else"}
    | {"unevaluatedItems", "unevaluatedProperties"}
)


class TooComplex(Exception):
    pass


class Checker:
    def __init__(self) -> None:
        self.active: set[tuple[int, int]] = set()
        self.budget = BUDGET

    def compare(self, r: Node, w: Node, path: str) -> list[Difference]:
        self.budget -= 1
        if self.budget < 0:
            raise TooComplex
        r, w = self.deref(r), self.deref(w)
        if w.false or r.trivial:
            return []
        if r.false:
            return [Difference("TYPE_NARROWED", path, "the reader's schema is false: it accepts no value")]
        if any(self.deref(member).false for _, member in self.parts(w).alls):
            return []  # the writer accepts nothing
        key = (id(r.schema), id(w.schema))
        if key in self.active:
            return []
        self.active.add(key)
        try:
            return self._compare(r, w, path)
        finally:
            self.active.discard(key)

    def _compare(self, r: Node, w: Node, path: str) -> list[Difference]:
        parts = self.parts(r)
        diffs: list[Difference] = []
        for segment, member in parts.alls:
            diffs += self.compare(member, w, f"{path}/{segment}")
        for keyword, branches in parts.sums:
            diffs += self.sum_covers(branches, w, f"{path}/{keyword}", keyword)
        for negated in parts.nots:
            diffs += self.not_covers(negated, w, f"{path}/not")
        if not parts.base.trivial:
            diffs += self.base_covers(parts.base, w, path)
        return diffs

    def deref(self, node: Node) -> Node:
        """Follows a ``$ref`` that stands for its whole schema (alone, or in drafts where it replaces its
        siblings); one beside other keywords in later drafts stays, and ``parts`` treats it as an allOf."""
        for _ in range(64):
            ref = node.get("$ref")
            if not isinstance(ref, str):
                return node
            alone = not (ASSERTIONS - {"$ref"}) & node.keywords()
            if not (alone or node.side.ref_replaces_siblings):
                return node
            node = self.lookup(node, ref)
        return node

    def lookup(self, node: Node, ref: str) -> Node:
        try:
            resolved = node.resolver.lookup(ref)
        except referencing.exceptions.Unresolvable:
            resolved = None
        if resolved is None or not isinstance(resolved.contents, dict | bool):
            # Parsing checked that every reference resolves to a schema; one that still does not accepts
            # nothing here, which makes a reader incompatible.
            return Node(False, node.resolver, node.side)
        scope = in_scope(resolved.resolver, resolved.contents, node.side.spec)
        return Node(resolved.contents, scope, node.side)

    def parts(self, node: Node) -> Parts:
        if not isinstance(node.schema, dict):
            return Parts(node, [], [], [])
        keys = node.keywords()
        base = Node(
            {k: node.schema[k] for k in keys if k not in _COMBINATORS},
            node.resolver,
            node.side,
            applied=bool(_IN_PLACE & keys),
        )
        alls = [(f"allOf/{i}", node.child(s)) for i, s in enumerate(node.get("allOf") or ())]
        ref = node.get("$ref")
        if isinstance(ref, str):
            alls.append(("$ref", self.lookup(node, ref)))
        sums: list[tuple[str, list[Node]]] = [
            (k, [node.child(s) for s in node.get(k)]) for k in ("anyOf", "oneOf") if k in keys
        ]
        nots = [node.child(node.get("not"))] if "not" in keys else []
        return Parts(base, alls, sums, nots)

    def sum_covers(self, branches: list[Node], w: Node, path: str, keyword: str) -> list[Difference]:
        closest: list[Difference] = []
        for branch in branches:
            diffs = self.compare(branch, w, path)
            if not diffs:
                return []
            if not closest or len(diffs) < len(closest):
                closest = diffs
        wparts = self.parts(self.deref(w))
        for _, wbranches in wparts.sums:
            merged = [self.merge(wparts.base, b) for b in wbranches]
            if all(any(not self.compare(b, m, path) for b in branches) for m in merged):
                return []
        for _, member in wparts.alls:
            if not self.sum_covers(branches, member, path, keyword):
                return []
        hint = f"; closest branch: {closest[0]}" if closest else ""
        return [
            Difference(
                "SUM_TYPE_NARROWED", path, f"a value the writer accepts fits no {keyword} branch{hint}"
            )
        ]

    def not_covers(self, negated: Node, w: Node, path: str) -> list[Difference]:
        negated = self.deref(negated)
        if negated.false:
            return []
        wparts = self.parts(self.deref(w))
        if any(not self.compare(wnot, negated, path) for wnot in wparts.nots):
            return []
        values = self.finite_values(wparts.base)
        if values is not None and not any(self.valid(negated, v) for v in values):
            return []
        rtypes, wtypes = types.types_of(negated), types.types_of(wparts.base)
        if rtypes is not None and wtypes is not None and not types.overlap(rtypes, wtypes):
            return []
        return [Difference("NOT_TYPE_EXTENDED", path, "the reader excludes values the writer may accept")]

    def base_covers(self, base: Node, w: Node, path: str) -> list[Difference]:
        wparts = self.parts(self.deref(w))
        diffs = self.plain(base, wparts.base, path)
        if not diffs or not (wparts.alls or wparts.sums):
            return diffs
        for _, member in wparts.alls:
            if not self.compare(base, member, path):
                return []
        merged = wparts.base
        for _, member in wparts.alls:
            merged = self.merge(merged, member)
        if merged is not wparts.base and not self.compare(base, merged, path):
            return []
        for _, wbranches in wparts.sums:
            if all(not self.compare(base, self.merge(wparts.base, b), path) for b in wbranches):
                return []
        return diffs

    def merge(self, base: Node, member: Node) -> Node:
        """A writer's base and one member as one object when that means the same or accepts more (disjoint
        keywords, none whose meaning depends on siblings); else the member alone, which accepts more."""
        member = self.deref(member)
        b, m = base.schema, member.schema
        if not isinstance(b, dict) or not isinstance(m, dict) or member.resolver is not base.resolver:
            return member
        if member.side is not base.side or (ASSERTIONS & base.keywords() & member.keywords()):
            return member
        if _NO_MERGE & (base.keywords() | member.keywords()):
            return member
        return Node({**b, **m}, base.resolver, base.side)

    def plain(self, r: Node, w: Node, path: str) -> list[Difference]:
        """Reader and writer without combinators on the reader's side (the writer's are ignored: its base
        accepts at least what it accepts)."""
        if w.false or r.trivial:
            return []
        if r.false:
            return [Difference("TYPE_NARROWED", path, "the reader's schema is false: it accepts no value")]
        values = self.finite_values(w)
        if values is not None:
            return self.values_covered(r, w, values, path)
        if "enum" in r.keywords() or "const" in r.keywords():
            keyword = "enum" if "enum" in r.keywords() else "const"
            rule = "ENUM_ARRAY_NARROWED" if keyword == "enum" else "ENUM_ARRAY_CHANGED"
            return [
                Difference(
                    rule, f"{path}/{keyword}", f"the reader's {keyword} limits values the writer did not"
                )
            ]
        diffs = types.compare_types(r, w, path)
        produced = types.produced(r, w)
        if "string" in produced:
            diffs += types.strings(r, w, path)
        if "number" in produced or "integer" in produced:
            diffs += types.numbers(r, w, path)
        if "object" in produced:
            diffs += objects(self, r, w, path)
        if "array" in produced:
            diffs += types.arrays(self, r, w, path)
        return diffs + self.unanalysed(r, w, path)

    def unanalysed(self, r: Node, w: Node, path: str) -> list[Difference]:
        diffs = []
        for keyword in sorted(UNANALYSED & r.keywords()):
            if keyword.startswith("unevaluated") and not r.applied:
                continue  # a content model like additionalProperties and additionalItems: compared there
            if keyword.startswith("unevaluated") and not r.sub(keyword).trivial:
                detail = f"{keyword} beside in-place applicators is not analysed; counted as incompatible"
            elif r.get(keyword) != w.get(keyword):
                detail = f"the reader's {keyword} differs from the writer's, and is not analysed"
            else:
                continue
            diffs.append(Difference("KEYWORD_CHANGED", f"{path}/{keyword}", detail))
        return diffs

    def finite_values(self, w: Node) -> list[Any] | None:
        """The values a writer can accept, when they can be listed; else None."""
        if not isinstance(w.schema, dict):
            return None
        if "const" in w.keywords():
            return [w.get("const")]
        if isinstance(w.get("enum"), list):
            return list(w.get("enum"))
        wtypes = types.types_of(w)
        if wtypes and wtypes <= {"null", "boolean"}:
            return ([None] if "null" in wtypes else []) + ([False, True] if "boolean" in wtypes else [])
        return None

    def values_covered(self, r: Node, w: Node, values: list[Any], path: str) -> list[Difference]:
        diffs = []
        for value in values:
            if not self.valid(w, value) or self.valid(r, value):
                continue
            error = best_match(self.validator(r).iter_errors(value))
            keyword = str(error.validator) if error is not None else "schema"
            rule = (
                _VALUE_RULES.get(keyword)
                or "_".join(re.findall("[A-Z]?[a-z]+", keyword)).upper() + "_NARROWED"
            )
            diffs.append(
                Difference(
                    rule, f"{path}/{keyword}", f"the writer's value {value!r} fails the reader's {keyword}"
                )
            )
        return diffs

    def validator(self, node: Node) -> Validator:
        # ``_resolver`` is jsonschema's own parameter for a subschema's place in its document: evolve
        # keeps the root's registry and format checker, and the node brings its base URI.
        return node.side.validator.evolve(schema=node.schema, _resolver=node.resolver)

    def valid(self, node: Node, value: Any) -> bool:
        try:
            return bool(self.validator(node).is_valid(value))
        except referencing.exceptions.Unresolvable:
            return False


def known_keywords(schema: JsonSchema) -> frozenset[str]:
    """The assertions of the schema's draft: what its validator validates, with the keywords that
    validate as part of another (``then``/``else`` with ``if``; ``minContains``/``maxContains`` with
    ``contains`` from 2019-09; draft 4's boolean ``exclusiveMaximum`` with ``maximum``)."""
    known = set(type(schema.validator).VALIDATORS)
    if "maximum" in known:
        known |= {"exclusiveMaximum", "exclusiveMinimum"}  # draft 4's booleans, read with maximum/minimum
    if "if" in known:
        known |= {"then", "else"}
    if "dependentRequired" in known:
        known |= {"minContains", "maxContains"}
    return frozenset(known)


def root(schema: JsonSchema) -> Node:
    spec = schema.specification
    side = Side(
        schema.validator, spec, spec.name in ("draft-04", "draft-06", "draft-07"), known_keywords(schema)
    )
    return Node(schema.schema, in_scope(schema.resolver(), schema.schema, spec), side)


def differences(reader: JsonSchema, writer: JsonSchema) -> Iterator[Difference]:
    yield from Checker().compare(root(reader), root(writer), "#")


def check(reader: JsonSchema, writer: JsonSchema) -> list[str]:
    """The reasons ``reader`` cannot accept every value ``writer`` accepts; empty when it can."""
    try:
        found = list(differences(reader, writer))
    except (TooComplex, RecursionError):
        return [f"TOO_COMPLEX at #: more than {BUDGET} subschema comparisons; counted as incompatible"]
    return list(dict.fromkeys(str(d) for d in found))
