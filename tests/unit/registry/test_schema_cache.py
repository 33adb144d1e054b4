"""The schema cache of validation on produce (registry/schema_cache.py): schemas kept for good, subject
lists for their time to live, a refusal read again before it stands (but not more than once per
``recheck_s``), nothing read with ``load=False``, and hits and misses counted."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from registry.schema_cache import DEFAULT_RECHECK_S, DEFAULT_TTL_S, SchemaCache
from registry.validate import RecordValidator
from registry.verdicts import LazyValidator, RecordRefused, Unresolved
from storage.clock import ManualClock
from tests.unit.registry.validation_fakes import (
    AVRO,
    VALUE,
    Counts,
    FakeLookup,
    avro_bytes,
    batch,
    check,
    framed,
    validator,
)

ORDER = framed(17, avro_bytes({"id": 1, "item": "tea"}))


def test_nothing_is_read_on_the_loop_and_a_load_fills_the_cache() -> None:
    lookup = FakeLookup()
    lookup.register(17, "orders-value", AVRO)
    counts = Counts()
    v = validator(lookup, metrics=counts)
    with pytest.raises(Unresolved):
        check(v, "orders", [VALUE], batch([ORDER]), load=False)
    assert lookup.reads == {}
    check(v, "orders", [VALUE], batch([ORDER]), load=True)
    check(v, "orders", [VALUE], batch([ORDER]), load=False)
    assert lookup.reads == {"schema": 1, "subjects": 1}
    # The batch's verdict is asked three times: missed twice (the second read the schema and its
    # subjects), then answered from the verdicts that passed, without the schema and subject caches.
    assert counts.cache == {
        ("verdict", False): 2,
        ("schema", False): 1,
        ("subjects", False): 1,
        ("verdict", True): 1,
    }
    # The attempt that raised Unresolved counted nothing: two checked records, one each.
    assert counts.validated == {("orders", "value", "valid"): 2}


def test_a_schema_registered_on_another_agent_is_seen_before_refusing() -> None:
    """A negative answer from the cache is read again from the store before it refuses: an id registered
    under the subject meanwhile passes, though the id's subject list is fresh."""
    lookup = FakeLookup()
    lookup.register(17, "orders-value", AVRO)
    clock = ManualClock()
    v = validator(lookup, clock)
    check(v, "orders", [VALUE], batch([ORDER]))
    lookup.register(17, "payments-value", AVRO)  # on another agent, within the subject list's TTL
    with pytest.raises(Unresolved):
        check(v, "payments", [VALUE], batch([ORDER]), load=False)
    check(v, "payments", [VALUE], batch([ORDER]), load=True)
    assert lookup.reads["subjects"] == 2
    # A refusal the store confirmed stands on the loop for a moment, then is read again.
    with pytest.raises(RecordRefused, match="not registered under subject refunds-value"):
        check(v, "refunds", [VALUE], batch([ORDER]))
    with pytest.raises(RecordRefused, match="not registered under subject refunds-value"):
        check(v, "refunds", [VALUE], batch([ORDER]), load=False)
    assert lookup.reads["subjects"] == 3
    clock.advance(DEFAULT_RECHECK_S)
    with pytest.raises(Unresolved):
        check(v, "refunds", [VALUE], batch([ORDER]), load=False)


def test_a_refusal_read_a_moment_ago_stands_without_another_read() -> None:
    lookup = FakeLookup()
    v = validator(lookup, ManualClock())
    for attempt in range(50):
        with pytest.raises(RecordRefused, match="schema id 17 is not registered"):
            # The first one reads (off the loop); the next ones, on the loop, stand on that read.
            check(v, "orders", [VALUE], batch([ORDER]), load=attempt == 0)
    assert lookup.reads == {"schema": 1}


def test_an_unknown_id_registered_later_is_found() -> None:
    lookup = FakeLookup()
    clock = ManualClock()
    v = validator(lookup, clock)
    with pytest.raises(RecordRefused):
        check(v, "orders", [VALUE], batch([ORDER]))
    lookup.register(17, "orders-value", AVRO)
    clock.advance(DEFAULT_RECHECK_S)
    check(v, "orders", [VALUE], batch([ORDER]))


def test_subjects_expire_and_schemas_do_not() -> None:
    lookup = FakeLookup()
    lookup.register(17, "orders-value", AVRO)
    clock = ManualClock()
    v = validator(lookup, clock)
    check(v, "orders", [VALUE], batch([ORDER]))
    clock.advance(DEFAULT_TTL_S - 0.5)
    check(v, "orders", [VALUE], batch([ORDER]), load=False)
    clock.advance(1)
    with pytest.raises(Unresolved):
        check(v, "orders", [VALUE], batch([ORDER]), load=False)
    # A subject deleted for good (its versions gone) is seen once the list is read again.
    lookup.usages[17].clear()
    with pytest.raises(RecordRefused, match="not registered under subject orders-value"):
        check(v, "orders", [VALUE], batch([ORDER]))
    assert lookup.reads == {"schema": 1, "subjects": 2}


def test_guids_resolve_through_ids_and_unknown_ones_are_read_again() -> None:
    lookup = FakeLookup()
    guid = lookup.register(17, "orders-value", AVRO)
    clock = ManualClock()
    cache = SchemaCache(lookup, clock.monotonic)
    with pytest.raises(Unresolved):
        cache.schema_by_guid(guid, False)
    found = cache.schema_by_guid(guid, True)
    assert found is not None
    assert (found.schema_id, found.parsed) == (17, AVRO)
    assert cache.schema_by_guid(guid, False) == found
    missing = "00000000-0000-4000-8000-000000000001"
    assert cache.schema_by_guid(missing, True) is None
    assert cache.schema_by_guid(missing, False) is None  # read a moment ago
    clock.advance(DEFAULT_RECHECK_S)
    with pytest.raises(Unresolved):
        cache.schema_by_guid(missing, False)
    assert lookup.reads == {"guid": 2, "schema": 1}


def test_a_schema_that_does_not_parse_is_a_refusal() -> None:
    from registry.errors import InvalidSchema

    class Broken(FakeLookup):
        def schema(self, schema_id: int) -> None:
            raise InvalidSchema("unknown type x")

    lookup = Broken()
    lookup.usages[17] = {"orders-value"}
    with pytest.raises(RecordRefused, match="record 0: schema id 17 does not parse: unknown type x"):
        check(validator(lookup), "orders", [VALUE], batch([ORDER]))


def test_the_cache_is_bounded() -> None:
    lookup = FakeLookup()
    for i in range(1, 11):
        lookup.register(i, "t-value", AVRO)
    cache = SchemaCache(lookup, ManualClock().monotonic, size=4)
    for i in range(1, 11):
        cache.schema(i, True)
    cache.schema(10, False)
    with pytest.raises(Unresolved):
        cache.schema(1, False)


def test_the_lazy_validator_builds_off_the_loop_once() -> None:
    """The doors hold a LazyValidator: a check on the event loop before the real validator exists asks to
    be checked off the loop (where its libraries load), and it is built once however many threads ask."""
    lookup = FakeLookup()
    lookup.register(17, "orders-value", AVRO)
    built: list[object] = []

    def build() -> RecordValidator:
        built.append(object())
        return validator(lookup)

    lazy = LazyValidator(build)
    with pytest.raises(Unresolved):
        check(lazy, "orders", [VALUE], batch([ORDER]), load=False)
    assert not lazy.built
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: check(lazy, "orders", [VALUE], batch([ORDER])), range(8)))
    check(lazy, "orders", [VALUE], batch([ORDER]), load=False)
    assert (lazy.built, len(built)) == (True, 1)
