"""The registry's small rules, sans IO: subject names, version numbers, which mode and level apply, and the
fingerprint that gives one schema one id."""

from __future__ import annotations

import pytest

from registry import errors
from registry.compatibility import CompatibilityLevel
from registry.levels import effective_level, effective_normalize, parse_level
from registry.modes import Mode, effective_mode, parse_mode, require_registrable
from registry.names import parse_version, validate_subject
from registry.parsing import fingerprint, guid, schema_type_of
from storage.metadata.schema_store import ConfigRow, SchemaRef


@pytest.mark.parametrize(
    ("given", "expected"), [("latest", None), ("-1", None), (-1, None), ("1", 1), (7, 7)]
)
def test_versions(given: str | int, expected: int | None) -> None:
    assert parse_version(given) == expected


@pytest.mark.parametrize("given", ["0", 0, "-2", "abc", "1.0", " ", "+3", 2**31, str(2**31)])
def test_invalid_versions(given: str | int) -> None:
    with pytest.raises(errors.InvalidVersion) as refused:
        parse_version(given)
    assert refused.value.code == 42202


@pytest.mark.parametrize("name", ["orders-value", "a/b", "quotes\"{:}'", "ünïcode", "x" * 300])
def test_subject_names(name: str) -> None:
    assert validate_subject(name) == name


@pytest.mark.parametrize("name", ["", "a\nb", "\x00", "del\x7f", "c1\x85", "__GLOBAL", "__EMPTY"])
def test_invalid_subject_names(name: str) -> None:
    with pytest.raises(errors.InvalidSubject) as refused:
        validate_subject(name)
    assert refused.value.code == 42208


def test_modes() -> None:
    assert effective_mode(None, None) is Mode.READWRITE
    assert effective_mode("IMPORT", "READONLY") is Mode.IMPORT  # the subject's own wins...
    assert effective_mode("READWRITE", "READONLY_OVERRIDE") is Mode.READONLY_OVERRIDE  # ...but this
    assert effective_mode(None, "READONLY") is Mode.READONLY
    assert effective_mode("GARBAGE", None) is Mode.READWRITE
    assert parse_mode("import") is Mode.IMPORT
    with pytest.raises(errors.InvalidMode):
        parse_mode("sometimes")
    require_registrable("s", Mode.READWRITE, with_id=False)
    require_registrable("s", Mode.IMPORT, with_id=True)
    for mode, with_id in ((Mode.READONLY, False), (Mode.IMPORT, False), (Mode.READWRITE, True)):
        with pytest.raises(errors.OperationNotPermitted):
            require_registrable("s", mode, with_id)


def test_levels() -> None:
    assert effective_level(None, None) is CompatibilityLevel.BACKWARD
    assert effective_level(None, ConfigRow("FULL", None)) is CompatibilityLevel.FULL
    assert effective_level(ConfigRow("NONE", None), ConfigRow("FULL", None)) is CompatibilityLevel.NONE
    assert effective_level(ConfigRow(None, True), ConfigRow("FULL", None)) is CompatibilityLevel.FULL
    assert parse_level("forward_transitive") is CompatibilityLevel.FORWARD_TRANSITIVE
    with pytest.raises(errors.InvalidCompatibilityLevel):
        parse_level("nonexistentmode")
    assert effective_normalize(None, None) is False
    assert effective_normalize(ConfigRow(None, None), ConfigRow(None, True)) is True
    assert effective_normalize(ConfigRow(None, False), ConfigRow(None, True)) is False


def test_fingerprints_cover_type_text_and_references() -> None:
    ref = SchemaRef("a.proto", "a", 1)
    base = fingerprint("AVRO", '"int"', ())
    assert fingerprint("AVRO", '"int"', ()) == base
    assert (
        len(
            {
                base,
                fingerprint("JSON", '"int"', ()),
                fingerprint("AVRO", '"long"', ()),
                fingerprint("AVRO", '"int"', (ref,)),
                fingerprint("AVRO", '"int"', (SchemaRef("a.proto", "a", 2),)),
            }
        )
        == 5
    )
    assert guid(base) == guid(base) != guid(fingerprint("JSON", '"int"', ()))
    assert schema_type_of("protobuf") == "PROTOBUF"
    with pytest.raises(errors.InvalidSchema):
        schema_type_of("AVROO")
