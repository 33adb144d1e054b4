"""The JSON Schema compatibility checker's keyword groups: ``type``, then the keywords of strings, numbers,
objects and arrays, each compared only when the writer can produce that type (a keyword constrains only
values of its type: ``minLength`` says nothing about a number).

Every function gets the reader's and the writer's bases (no combinators on the reader's side) and returns the
differences that make some writer value invalid for the reader. Rule names follow Confluent's.

Patterns (``pattern``, ``patternProperties``) are ECMA 262 regular expressions; a ``patternProperties`` key
is matched against property names with Python's ``re``, and one Python cannot compile is taken to match
every name on both sides. ``pattern`` itself is compared as text: the same pattern, or none in the reader.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from registry.formats.jsonschema_nodes import Difference, Node

if TYPE_CHECKING:
    from registry.formats.jsonschema_compat import Checker

ALL_TYPES = frozenset({"null", "boolean", "object", "array", "number", "string"})


def types_of(node: Node) -> frozenset[str] | None:
    """A schema's ``type`` as a set; None when it has none (every type)."""
    value = node.get("type")
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, list):
        return frozenset(value)
    return None


def _accepts(rtypes: frozenset[str], t: str) -> bool:
    return t in rtypes or (t == "integer" and "number" in rtypes)


def overlap(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether some value has a type in both sets."""
    return any(_accepts(b, t) or (t == "number" and "integer" in b) for t in a)


def produced(r: Node, w: Node) -> set[str]:
    """The types the writer can produce that the reader accepts at least in part."""
    wtypes = types_of(w) or ALL_TYPES
    rtypes = types_of(r)
    if rtypes is None:
        return set(wtypes)
    return {t for t in wtypes if _accepts(rtypes, t) or (t == "number" and "integer" in rtypes)}


def compare_types(r: Node, w: Node, path: str) -> list[Difference]:
    rtypes = types_of(r)
    if rtypes is None:
        return []
    wtypes = types_of(w) or ALL_TYPES
    missing = sorted(t for t in wtypes if not _accepts(rtypes, t))
    if not missing:
        return []
    kept = produced(r, w)
    rule = "TYPE_NARROWED" if kept else "TYPE_CHANGED"
    writer = "any type" if types_of(w) is None else ", ".join(sorted(wtypes))
    detail = (
        f"the reader's type {', '.join(sorted(rtypes))} does not accept the writer's {', '.join(missing)}"
    )
    return [
        Difference(rule, f"{path}/type" if rule == "TYPE_NARROWED" else path, f"{detail} (writer: {writer})")
    ]


def lower_bound(rule: str, keyword: str, r: Node, w: Node, path: str, floor: int = 0) -> list[Difference]:
    """A lower bound: the reader's must not exceed the writer's (``floor`` is the bound when absent)."""
    rv, wv = r.get(keyword), w.get(keyword)
    if rv is None or rv <= floor:
        return []
    if wv is None:
        return [Difference(f"{rule}_ADDED", f"{path}/{keyword}", f"the reader adds {keyword} {rv}")]
    if rv > wv:
        return [
            Difference(f"{rule}_INCREASED", f"{path}/{keyword}", f"{keyword} increased from {wv} to {rv}")
        ]
    return []


def upper_bound(rule: str, keyword: str, r: Node, w: Node, path: str) -> list[Difference]:
    rv, wv = r.get(keyword), w.get(keyword)
    if rv is None:
        return []
    if wv is None:
        return [Difference(f"{rule}_ADDED", f"{path}/{keyword}", f"the reader adds {keyword} {rv}")]
    if rv < wv:
        return [
            Difference(f"{rule}_DECREASED", f"{path}/{keyword}", f"{keyword} decreased from {wv} to {rv}")
        ]
    return []


def strings(r: Node, w: Node, path: str) -> list[Difference]:
    diffs = lower_bound("MIN_LENGTH", "minLength", r, w, path) + upper_bound(
        "MAX_LENGTH", "maxLength", r, w, path
    )
    for keyword, rule in (("pattern", "PATTERN"), ("format", "FORMAT")):
        rv, wv = r.get(keyword), w.get(keyword)
        if rv is not None and rv != wv:
            change = "ADDED" if wv is None else "CHANGED"
            was = "" if wv is None else f" (was {wv!r})"
            diffs.append(
                Difference(f"{rule}_{change}", f"{path}/{keyword}", f"the reader's {keyword} is {rv!r}{was}")
            )
    return diffs


def _bound(node: Node, lower: bool) -> tuple[Any, bool, str] | None:
    """The tightest lower (or upper) bound: (value, exclusive, keyword). Draft 4 writes exclusivity as a
    boolean beside ``minimum``; later drafts give ``exclusiveMinimum`` its own number."""
    plain, exclusive = ("minimum", "exclusiveMinimum") if lower else ("maximum", "exclusiveMaximum")
    found: list[tuple[Any, bool, str]] = []
    if isinstance(node.get(plain), int | float):
        flag = node.get(exclusive) is True
        found.append((node.get(plain), flag, exclusive if flag else plain))
    value = node.get(exclusive)
    if isinstance(value, int | float) and not isinstance(value, bool):
        found.append((value, True, exclusive))
    if not found:
        return None
    if lower:
        return max(found, key=lambda b: (b[0], b[1]))
    return min(found, key=lambda b: (b[0], not b[1]))


def numbers(r: Node, w: Node, path: str) -> list[Difference]:
    diffs = []
    for lower in (True, False):
        rb, wb = _bound(r, lower), _bound(w, lower)
        if rb is None:
            continue
        rule = "_".join(re.findall("[A-Z]?[a-z]+", rb[2])).upper()
        where = f"{path}/{rb[2]}"
        if wb is None:
            diffs.append(Difference(f"{rule}_ADDED", where, f"the reader adds {rb[2]} {rb[0]}"))
            continue
        tighter = rb[0] > wb[0] if lower else rb[0] < wb[0]
        if tighter or (rb[0] == wb[0] and rb[1] and not wb[1]):
            change = "INCREASED" if lower else "DECREASED"
            diffs.append(
                Difference(
                    f"{rule}_{change}", where, f"{rb[2]} {rb[0]} excludes the writer's {wb[2]} {wb[0]}"
                )
            )
    diffs += _multiple_of(r, w, path)
    return diffs


def _multiple_of(r: Node, w: Node, path: str) -> list[Difference]:
    rm, wm = r.get("multipleOf"), w.get("multipleOf")
    if rm is None:
        return []
    if wm is None and types_of(w) == frozenset({"integer"}):
        wm = 1
    where = f"{path}/multipleOf"
    if wm is None:
        return [Difference("MULTIPLE_OF_ADDED", where, f"the reader adds multipleOf {rm}")]
    if (Fraction(str(wm)) / Fraction(str(rm))).denominator == 1:
        return []
    rule = "MULTIPLE_OF_EXPANDED" if rm > wm else "MULTIPLE_OF_CHANGED"
    return [Difference(rule, where, f"the writer's multiples of {wm} are not all multiples of {rm}")]


def matches(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return True


def schemas(node: Node, key: str) -> dict[str, Node]:
    value = node.get(key)
    return {k: node.child(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _positions(node: Node) -> tuple[list[Node], Node, str, str]:
    """An array schema as (the schemas of its first positions, the schema of every later item, and their
    keywords): ``prefixItems`` + ``items`` (2020-12), ``items`` as a list + ``additionalItems`` (before),
    or ``items`` alone."""
    if isinstance(node.get("prefixItems"), list):
        return (
            [node.child(s) for s in node.get("prefixItems")],
            node.additional("items"),
            "prefixItems",
            "items",
        )
    if isinstance(node.get("items"), list):
        rest = node.additional("additionalItems")
        return [node.child(s) for s in node.get("items")], rest, "items", "additionalItems"
    return [], node.additional("items"), "items", "items"


def arrays(c: Checker, r: Node, w: Node, path: str) -> list[Difference]:
    rprefix, rrest, rkw, rrest_kw = _positions(r)
    wprefix, wrest, _, _ = _positions(w)
    diffs: list[Difference] = []
    for i in range(max(len(rprefix), len(wprefix))):
        rs = rprefix[i] if i < len(rprefix) else rrest
        ws = wprefix[i] if i < len(wprefix) else wrest
        where = f"{path}/{rkw}/{i}" if i < len(rprefix) else f"{path}/{rrest_kw}"
        subs = c.compare(rs, ws, where)
        if not subs:
            continue
        if i < len(rprefix) and i < len(wprefix):
            diffs += subs
        elif i >= len(rprefix):
            closed = c.deref(rrest).false
            rule = (
                "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"
                if closed
                else "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
            )
            diffs.append(Difference(rule, where, f"the writer's item {i} is not accepted: {subs[0]}"))
        else:
            rule = (
                "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"
                if wrest.trivial
                else "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
            )
            diffs.append(
                Difference(
                    rule, where, f"the reader's item {i} restricts what the writer accepted: {subs[0]}"
                )
            )
    subs = c.compare(rrest, wrest, f"{path}/{rrest_kw}")
    if subs and not (rprefix or wprefix):
        diffs += subs
    elif subs:
        rule = "ADDITIONAL_ITEMS_REMOVED" if c.deref(rrest).false else "ADDITIONAL_ITEMS_NARROWED"
        diffs.append(Difference(rule, f"{path}/{rrest_kw}", f"items past position {len(rprefix)}: {subs[0]}"))
    diffs += lower_bound("MIN_ITEMS", "minItems", r, w, path) + upper_bound(
        "MAX_ITEMS", "maxItems", r, w, path
    )
    if r.get("uniqueItems") is True and w.get("uniqueItems") is not True:
        diffs.append(
            Difference("UNIQUE_ITEMS_ADDED", f"{path}/uniqueItems", "the reader requires unique items")
        )
    return diffs + _contains(c, r, w, path)


def _contains(c: Checker, r: Node, w: Node, path: str) -> list[Difference]:
    """``contains``: at least ``minContains`` (1 by default) items fit it, and at most ``maxContains``."""
    if r.get("contains") is None:
        return []
    where = f"{path}/contains"
    least = r.get("minContains") if r.get("minContains") is not None else 1
    diffs: list[Difference] = []
    if w.get("contains") is None:
        # Even ``contains: {}`` needs that many items, which only the writer's minItems can promise.
        enough = r.sub("contains").trivial and (w.get("minItems") or 0) >= least
        if least > 0 and not enough:
            diffs.append(Difference("CONTAINS_ADDED", where, f"the reader requires {least} matching item(s)"))
    else:
        diffs += c.compare(r.sub("contains"), w.sub("contains"), where)
        diffs += lower_bound("MIN_CONTAINS", "minContains", r, w, path, floor=1)
    if r.get("maxContains") is not None:
        same = r.get("contains") == w.get("contains")
        if not same or w.get("maxContains") is None or w.get("maxContains") > r.get("maxContains"):
            detail = "the reader bounds the items matching contains; the writer did not, or not as tightly"
            diffs.append(Difference("MAX_CONTAINS_DECREASED", f"{path}/maxContains", detail))
    return diffs
