"""The seven compatibility levels: which (reader, writer) pairs each one asks a format about."""

from __future__ import annotations

import json
from typing import Any

from registry.compatibility import CompatibilityLevel, check
from registry.formats.avro import FORMAT, AvroSchema


def record(*fields: dict[str, Any]) -> AvroSchema:
    return FORMAT.parse(json.dumps({"type": "record", "name": "R", "fields": list(fields)}), [])


A = {"name": "a", "type": "int"}
B_DEFAULT = {"name": "b", "type": "string", "default": "x"}
B = {"name": "b", "type": "string"}
Z = {"name": "z", "type": "int"}

V1 = record(A)
V2 = record(A, B_DEFAULT)
# Reads V2's data (b is there) but not V1's (b has no default); V1 and V2 read its data.
B_REQUIRED = record(A, B)
# Drops a: reads V1's and V2's data, but neither can read its data (a has no default there).
A_DROPPED = record(B_DEFAULT)


def levels(new: AvroSchema, previous: list[AvroSchema]) -> dict[str, bool]:
    return {level.value: not check(level, FORMAT, new, previous) for level in CompatibilityLevel}


def test_none_checks_nothing() -> None:
    assert check(CompatibilityLevel.NONE, FORMAT, record({"name": "q", "type": "bytes"}), [V1, V2]) == []


def test_backward_checks_the_new_schema_against_the_latest_only() -> None:
    assert check(CompatibilityLevel.BACKWARD, FORMAT, B_REQUIRED, [V1, V2]) == []
    [reason] = check(CompatibilityLevel.BACKWARD, FORMAT, record(A, B_DEFAULT, Z), [V1, V2])
    assert reason.startswith("backward: reader_field_missing_default_value")


def test_backward_transitive_checks_every_previous_schema() -> None:
    [reason] = check(CompatibilityLevel.BACKWARD_TRANSITIVE, FORMAT, B_REQUIRED, [V1, V2])
    assert reason.startswith("backward:")
    assert ": b" in reason


def test_forward_checks_the_latest_reading_the_new_data() -> None:
    assert check(CompatibilityLevel.FORWARD, FORMAT, B_REQUIRED, [V1, V2]) == []
    [reason] = check(CompatibilityLevel.FORWARD, FORMAT, A_DROPPED, [V1, V2])
    assert reason.startswith("forward: reader_field_missing_default_value")
    assert ": a" in reason


def test_forward_transitive_checks_every_previous_reader() -> None:
    with_z, without_z = record(A, Z), record(A)
    assert check(CompatibilityLevel.FORWARD, FORMAT, without_z, [with_z, record(A)]) == []
    [reason] = check(CompatibilityLevel.FORWARD_TRANSITIVE, FORMAT, without_z, [with_z, record(A)])
    assert reason.startswith("forward:")
    assert ": z" in reason


def test_full_checks_both_directions() -> None:
    assert check(CompatibilityLevel.FULL, FORMAT, B_REQUIRED, [V1, V2]) == []
    # Dropping a is backward compatible but not forward.
    assert check(CompatibilityLevel.BACKWARD, FORMAT, A_DROPPED, [V1, V2]) == []
    [reason] = check(CompatibilityLevel.FULL, FORMAT, A_DROPPED, [V1, V2])
    assert reason.startswith("forward:")


def test_full_transitive_checks_both_directions_against_every_version() -> None:
    [reason] = check(CompatibilityLevel.FULL_TRANSITIVE, FORMAT, B_REQUIRED, [V1, V2])
    assert reason.startswith("backward:")
    assert check(CompatibilityLevel.FULL_TRANSITIVE, FORMAT, V2, [V1]) == []


def test_the_seven_levels_side_by_side() -> None:
    assert levels(B_REQUIRED, [V1, V2]) == {
        "NONE": True,
        "BACKWARD": True,
        "BACKWARD_TRANSITIVE": False,
        "FORWARD": True,
        "FORWARD_TRANSITIVE": True,
        "FULL": True,
        "FULL_TRANSITIVE": False,
    }
    assert levels(A_DROPPED, [V1, V2]) == {
        "NONE": True,
        "BACKWARD": True,
        "BACKWARD_TRANSITIVE": True,
        "FORWARD": False,
        "FORWARD_TRANSITIVE": False,
        "FULL": False,
        "FULL_TRANSITIVE": False,
    }


def test_no_previous_schema_is_always_compatible() -> None:
    assert all(levels(A_DROPPED, []).values())
