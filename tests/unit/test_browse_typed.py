"""The record browser's typed view (api/routes/browse.py over api/typed_records.py's ``SchemaReader``): which
subject names an id for a reader who may read only some subjects, and values the browser's JSON.parse
would change (NaN, integers beyond 2**53 - 1) sent as strings. A real registry service on SQLite; the
payloads are written with fastavro, not with Strata's codecs."""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterator
from pathlib import Path

import fastavro
import pytest

from api.routes.browse import _typed_out
from api.typed_records import SchemaReader, Typed, Undecoded
from registry.service import SchemaRegistry, default_formats
from storage.metadata import open_metadata_store

AVRO = {
    "type": "record",
    "name": "Reading",
    "fields": [{"name": "value", "type": "double"}, {"name": "count", "type": "long"}],
}


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[SchemaRegistry]:
    store = open_metadata_store(f"sqlite:///{tmp_path / 'metadata.db'}")
    try:
        yield SchemaRegistry(store, default_formats())
    finally:
        store.close()


def framed(schema_id: int, value: dict[str, object]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO), value)
    return b"\x00" + struct.pack(">I", schema_id) + out.getvalue()


def test_only_subjects_the_reader_may_read_name_the_schema(registry: SchemaRegistry) -> None:
    schema_id = registry.register("archive", json.dumps(AVRO)).schema_id
    registry.register("sensors-value", json.dumps(AVRO))
    data = framed(schema_id, {"value": 1.5, "count": 3})

    everyone = SchemaReader(registry, "sensors").decode(data, "value")
    assert isinstance(everyone, Typed)
    assert (everyone.schema.subject, everyone.value) == ("sensors-value", {"value": 1.5, "count": 3})
    archivist = SchemaReader(registry, "sensors", lambda s: s == "archive").decode(data, "value")
    assert isinstance(archivist, Typed)
    assert (archivist.schema.subject, archivist.schema.version) == ("archive", 1)
    stranger = SchemaReader(registry, "sensors", lambda s: s == "payments").decode(data, "value")
    assert stranger == Undecoded(f"not allowed to read a subject holding schema id {schema_id}")
    assert _typed_out(schema_id, stranger).model_dump(by_alias=True) == {
        "schema_id": schema_id,
        "schema_type": None,
        "subject": None,
        "version": None,
        "json": None,
        "error": f"not allowed to read a subject holding schema id {schema_id}",
    }


def test_values_javascript_would_change_are_sent_as_strings(registry: SchemaRegistry) -> None:
    schema_id = registry.register("sensors-value", json.dumps(AVRO)).schema_id
    reader = SchemaReader(registry, "sensors")
    for value, count, shown in (
        (float("nan"), 2**53 - 1, {"value": "NaN", "count": 2**53 - 1}),
        (float("inf"), 2**53, {"value": "Infinity", "count": str(2**53)}),
        (float("-inf"), -(2**63), {"value": "-Infinity", "count": str(-(2**63))}),
    ):
        decoded = reader.decode(framed(schema_id, {"value": value, "count": count}), "value")
        assert isinstance(decoded, Typed)
        out = _typed_out(schema_id, decoded)
        assert (out.subject, out.version, out.schema_type, out.error) == ("sensors-value", 1, "AVRO", None)
        assert out.json_value == shown
