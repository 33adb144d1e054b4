"""The JSON Schema compatibility checker's object keywords: content models, ``required``, property counts,
dependencies and ``propertyNames``.

**Content models**, in Confluent's terms: an object schema is *open* when a property it does not name may
hold anything (no ``additionalProperties``, or ``true``), *closed* when it may not appear at all
(``additionalProperties: false``), and *partially open* when it must fit a schema (``additionalProperties``
as a schema, or a ``patternProperties`` entry whose pattern matches the name). So:
- a property the reader adds is compatible when the writer was closed (no writer value has it), or when
  the writer's schema for it (partially open) fits the reader's, or when the reader accepts anything there;
  added to an open writer with a real schema, it restricts values the writer let through;
- a property the reader removes is compatible when the reader is open, or when its partially open schema
  accepts the writer's; removed from a closed reader, writer values holding it are refused (unless the
  writer's schema for it was ``false``).

A property's schema on one side is its ``properties`` entry, and on the reader's side also every matching
``patternProperties`` entry (all apply); on the writer's side one matching entry is enough (the writer's
value fits all of them, so it fits that one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from registry.formats.jsonschema_compat_types import lower_bound, matches, schemas, upper_bound
from registry.formats.jsonschema_nodes import Difference, Node

if TYPE_CHECKING:
    from registry.formats.jsonschema_compat import Checker


def _reader_schemas(r: Node, props: dict[str, Node], patterns: dict[str, Node], name: str) -> list[Node]:
    found = ([props[name]] if name in props else []) + [s for p, s in patterns.items() if matches(p, name)]
    return found or [r.additional("additionalProperties")]


def _writer_schemas(w: Node, props: dict[str, Node], patterns: dict[str, Node], name: str) -> list[Node]:
    found = ([props[name]] if name in props else []) + [s for p, s in patterns.items() if matches(p, name)]
    return found or [w.additional("additionalProperties")]


def _covers(c: Checker, rs: Node, writer_schemas: list[Node], where: str) -> list[Difference]:
    """A writer value fits every one of its schemas, so the reader's covers it if it covers any one."""
    first: list[Difference] = []
    for ws in writer_schemas:
        diffs = c.compare(rs, ws, where)
        if not diffs:
            return []
        first = first or diffs
    return first


def objects(c: Checker, r: Node, w: Node, path: str) -> list[Difference]:
    diffs = _properties(c, r, w, path)
    diffs += _unnamed(c, r, w, path)
    diffs += _required(r, w, path)
    diffs += lower_bound("MIN_PROPERTIES", "minProperties", r, w, path)
    diffs += upper_bound("MAX_PROPERTIES", "maxProperties", r, w, path)
    diffs += _dependencies(c, r, w, path)
    if r.get("propertyNames") is not None:
        # Property names are strings: a writer without propertyNames allows every string.
        wnames = w.sub("propertyNames") if w.get("propertyNames") is not None else w.child({"type": "string"})
        subs = c.compare(r.sub("propertyNames"), wnames, f"{path}/propertyNames")
        diffs += [Difference("PROPERTY_NAMES_NARROWED", d.path, d.detail) for d in subs]
    return diffs


def _properties(c: Checker, r: Node, w: Node, path: str) -> list[Difference]:
    rprops, wprops = schemas(r, "properties"), schemas(w, "properties")
    rpatterns, wpatterns = schemas(r, "patternProperties"), schemas(w, "patternProperties")
    required = r.get("required") if isinstance(r.get("required"), list) else []
    diffs: list[Difference] = []
    for name in sorted(rprops.keys() | wprops.keys()):
        where = f"{path}/properties/{name}"
        wss = _writer_schemas(w, wprops, wpatterns, name)
        subs = [d for rs in _reader_schemas(r, rprops, rpatterns, name) for d in _covers(c, rs, wss, where)]
        if not subs:
            continue
        if name in rprops and name in wprops:
            diffs += subs
        elif name in rprops:
            if all(c.deref(ws).trivial for ws in wss):
                kind = "REQUIRED" if name in required else "OPTIONAL"
                rule = f"{kind}_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
                detail = f"the writer's open content model let {name} hold any value; the reader restricts it"
            else:
                rule = "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                detail = f"the writer's schema for {name} does not fit the reader's: {subs[0]}"
            diffs.append(Difference(rule, where, detail))
        else:
            closed = all(c.deref(s).false for s in _reader_schemas(r, rprops, rpatterns, name))
            if closed:
                rule = "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"
                detail = f"the reader's closed content model refuses {name}, which the writer accepted"
            else:
                rule = "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                detail = (
                    f"the reader's schema for other properties does not accept the writer's {name}: {subs[0]}"
                )
            diffs.append(Difference(rule, where, detail))
    return diffs


def _unnamed(c: Checker, r: Node, w: Node, path: str) -> list[Difference]:
    """Properties neither side names: the reader's patterns and additionalProperties against whatever
    writer schema may apply to the same names."""
    rpatterns, wpatterns = schemas(r, "patternProperties"), schemas(w, "patternProperties")
    diffs: list[Difference] = []
    for pattern, rs in sorted(rpatterns.items()):
        where = f"{path}/patternProperties/{pattern}"
        candidates = (
            [wpatterns[pattern]]
            if pattern in wpatterns
            else [w.additional("additionalProperties"), *wpatterns.values()]
        )
        subs = [d for ws in candidates for d in c.compare(rs, ws, where)]
        if subs:
            diffs.append(
                Difference("PATTERN_PROPERTIES_NARROWED", where, f"names matching {pattern}: {subs[0]}")
            )
    where = f"{path}/additionalProperties"
    rs = r.additional("additionalProperties")
    others = [s for p, s in wpatterns.items() if p not in rpatterns]
    subs = [d for ws in [w.additional("additionalProperties"), *others] for d in c.compare(rs, ws, where)]
    if subs:
        if c.deref(rs).false:
            diffs.append(
                Difference(
                    "ADDITIONAL_PROPERTIES_REMOVED",
                    where,
                    "the reader refuses properties it does not name, the writer accepted them",
                )
            )
        else:
            diffs.append(
                Difference("ADDITIONAL_PROPERTIES_NARROWED", where, f"properties neither names: {subs[0]}")
            )
    return diffs


def _required(r: Node, w: Node, path: str) -> list[Difference]:
    rreq = r.get("required") if isinstance(r.get("required"), list) else []
    wreq = set(w.get("required")) if isinstance(w.get("required"), list) else set()
    props = r.get("properties") if isinstance(r.get("properties"), dict) else {}
    diffs = []
    for name in rreq:
        if name in wreq:
            continue
        prop = props.get(name)
        if isinstance(prop, dict) and "default" in prop:
            continue  # Confluent's rule: a required property with a default is compatible
        diffs.append(
            Difference(
                "REQUIRED_ATTRIBUTE_ADDED",
                f"{path}/required/{name}",
                f"the reader requires {name}, the writer did not",
            )
        )
    return diffs


def _dependency_tables(node: Node) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """``dependencies`` (drafts 4-7) split as 2019-09 did: property lists (``dependentRequired``) and
    schemas (``dependentSchemas``)."""
    lists: dict[str, list[Any]] = {}
    trees: dict[str, Any] = {}
    for key in ("dependencies", "dependentRequired", "dependentSchemas"):
        table = node.get(key)
        if not isinstance(table, dict):
            continue
        for name, value in table.items():
            if isinstance(value, list):
                lists[name] = lists.get(name, []) + value
            else:
                trees[name] = value
    return lists, trees


def _dependencies(c: Checker, r: Node, w: Node, path: str) -> list[Difference]:
    rlists, rtrees = _dependency_tables(r)
    wlists, wtrees = _dependency_tables(w)
    wreq = set(w.get("required")) if isinstance(w.get("required"), list) else set()
    diffs: list[Difference] = []
    for name, needed in sorted(rlists.items()):
        missing = sorted(set(needed) - set(wlists.get(name, ())) - wreq)
        if missing:
            rule = "DEPENDENCY_ARRAY_EXTENDED" if name in wlists else "DEPENDENCY_ARRAY_ADDED"
            detail = f"with {name}, the reader also requires {', '.join(map(str, missing))}"
            diffs.append(Difference(rule, f"{path}/dependencies/{name}", detail))
    for name, tree in sorted(rtrees.items()):
        where = f"{path}/dependencies/{name}"
        rs = r.child(tree)
        if rs.trivial:
            continue
        if name not in wtrees:
            diffs.append(
                Difference(
                    "DEPENDENCY_SCHEMA_ADDED",
                    where,
                    f"with {name}, the reader applies a schema the writer did not",
                )
            )
            continue
        diffs += c.compare(rs, w.child(wtrees[name]), where)
    return diffs
