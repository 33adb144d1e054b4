"""``buf breaking`` (npm ``@bufbuild/buf``) as an independent oracle for the Protobuf compatibility checker.

Every pair of ``tests/unit/registry/protobuf_pairs.py`` goes through ``buf breaking NEW --against OLD``
with buf's WIRE category (tests/registry_oracle/buf.py) and through Strata's checker at BACKWARD (the new
schema reads what the old one wrote). The verdicts must agree, except for the pairs in ``DELIBERATE``,
where Confluent's rules and buf's differ on purpose; each is listed with the reason, and must still differ,
so that the list cannot go stale.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from registry.formats.base import Resolved, SchemaType
from registry.formats.protobuf import FORMAT
from tests.registry_oracle.buf import buf_breaking, install_buf
from tests.unit.registry.protobuf_pairs import PAIRS, Pair

pytestmark = pytest.mark.integration

DELIBERATE = {
    "message removed": "Confluent: a payload's message indexes may address the message (MESSAGE_REMOVED); "
    "buf WIRE: message declarations are not on the wire",
    "field removed": "Confluent lets a field go (FIELD_REMOVED); buf WIRE wants its number reserved, so "
    "that it is never reused with another type (FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED)",
    "field renumbered": "a renumbered field is a removal and an addition to Confluent; buf WIRE wants the "
    "old number reserved",
    "oneof removed with its fields": "Confluent lets a whole oneof go; buf WIRE wants its numbers reserved",
    "int32 to enum": "Confluent counts an enum as an int32-like number; buf WIRE keeps enums and scalars "
    "apart (FIELD_WIRE_COMPATIBLE_TYPE)",
    "proto3 implicit int32 to repeated": "Confluent sees no label on a proto3 field written without one, so "
    "nothing changed; buf WIRE compares cardinality (FIELD_WIRE_COMPATIBLE_CARDINALITY)",
    "enum constant removed": "Confluent lets an enum constant go (ENUM_CONST_REMOVED); buf WIRE wants its "
    "number reserved (ENUM_VALUE_NO_DELETE_UNLESS_NUMBER_RESERVED)",
    "proto2 optional string to repeated": "Confluent: a string or bytes field reads the same singular or "
    "repeated (the last element is the singular value); buf WIRE: the field loses explicit presence "
    "(FIELD_WIRE_COMPATIBLE_CARDINALITY)",
    "proto3 bytes to repeated": "as for a proto2 string: Confluent allows the label change, buf does not",
    "field moved into a new oneof": "Confluent: one field alone in a new oneof excludes nothing it could "
    "be set with before; buf WIRE flags any change of oneof (FIELD_SAME_ONEOF)",
    "oneof renamed": "Confluent: a oneof's name is not on the wire and its members stay together; buf "
    "WIRE flags the members' change of oneof (FIELD_SAME_ONEOF)",
    "oneof field moved to top level": "Confluent: leaving a oneof only lifts an exclusion "
    "(ONEOF_FIELD_MOVED_TO_TOP_LEVEL); buf WIRE flags it (FIELD_SAME_ONEOF)",
}


@pytest.fixture(scope="module")
def buf() -> Path:
    return install_buf()


def strata_compatible(pair: Pair) -> bool:
    def parse(text: str, files: dict[str, str]) -> object:
        return FORMAT.parse(text, [Resolved(name, SchemaType.PROTOBUF, src) for name, src in files.items()])

    old, new = parse(pair.old, pair.old_files), parse(pair.new, pair.new_files)
    return FORMAT.compatibility(new, old) == []  # type: ignore[arg-type]


@pytest.mark.parametrize("pair", PAIRS, ids=[pair.name for pair in PAIRS])
def test_buf_agrees(buf: Path, tmp_path: Path, pair: Pair) -> None:
    findings = buf_breaking(buf, tmp_path, pair)
    ours = strata_compatible(pair)
    theirs = not findings
    if pair.name in DELIBERATE:
        assert ours != theirs, f"{pair.name}: buf and Strata now agree; drop it from DELIBERATE"
    else:
        assert ours == theirs, f"{pair.name}: Strata says compatible={ours}, buf found {findings}"


def test_deliberate_names_are_pairs() -> None:
    assert set(DELIBERATE) <= {pair.name for pair in PAIRS}
