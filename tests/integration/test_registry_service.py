"""The registry's service over the metadata store with the real formats (Avro, JSON Schema, Protobuf), on
SQLite and PostgreSQL: registration and its compatibility check under the subject's lock, lookups, reads,
deletes with Confluent's error codes, references, configs and modes (IMPORT included), and two registries
(two agents) on one database.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from registry import errors
from registry.formats.base import Reference, SchemaType
from registry.formats.protobuf import ProtobufSchema
from registry.modes import Mode
from registry.service import SchemaRegistry, default_formats
from registry.views import VersionView
from storage.metadata import MetadataStore, open_metadata_store

pytestmark = pytest.mark.integration


def record(name: str, *fields: tuple[str, object], **extra: object) -> str:
    body: dict[str, object] = {"type": "record", "name": name, "fields": []}
    for field_name, field_type in fields:
        field: dict[str, object] = {"name": field_name, "type": field_type}
        if field_name in extra:
            field["default"] = extra[field_name]
        body["fields"].append(field)  # type: ignore[attr-defined]
    return json.dumps(body)


V1 = record("User", ("name", "string"))
V2 = record("User", ("name", "string"), ("age", "int"), age=0)  # BACKWARD-compatible with V1
V3_BREAKS_V1 = record("User", ("name", "string"), ("age", "int"))  # reads V2 data, not V1 data
NO_DEFAULT = record("User", ("name", "string"), ("id", "long"))  # a new field without default: not BACKWARD


@pytest.fixture
def registry(metadata_store: MetadataStore) -> SchemaRegistry:
    return SchemaRegistry(metadata_store, default_formats())


@pytest.fixture
def two_registries(metadata_url: str) -> Iterator[tuple[SchemaRegistry, SchemaRegistry]]:
    """Two agents: a registry each, with a store each, on one database."""
    stores = [open_metadata_store(metadata_url), open_metadata_store(metadata_url)]
    try:
        yield SchemaRegistry(stores[0], default_formats()), SchemaRegistry(stores[1], default_formats())
    finally:
        for store in stores:
            store.close()


def code_of(exc: pytest.ExceptionInfo[errors.RegistryError]) -> int:
    return exc.value.code


def test_register_is_idempotent_and_ids_are_per_schema(registry: SchemaRegistry) -> None:
    first = registry.register("users-value", V1)
    assert (first.subject, first.version, first.deleted) == ("users-value", 1, False)
    # The same schema again, whitespace aside: the same version and id.
    assert registry.register("users-value", json.dumps(json.loads(V1), indent=2)) == first
    other = registry.register("other-value", V1)
    assert (other.schema_id, other.version) == (first.schema_id, 1)
    second = registry.register("users-value", V2)
    assert second.version == 2
    assert second.schema_id != first.schema_id
    got = registry.schema(first.schema_id)
    assert (got.schema_type, json.loads(got.text)) == (SchemaType.AVRO, json.loads(V1))
    with pytest.raises(errors.SchemaNotFound):
        registry.schema(second.schema_id + 100)
    assert registry.schema_by_guid(got.guid) == got
    assert registry.schema_subjects(first.schema_id) == ["other-value", "users-value"]
    assert registry.schema_versions(first.schema_id) == [("other-value", 1), ("users-value", 1)]
    assert registry.max_schema_id() == second.schema_id
    assert registry.parsed(first.schema_id) is registry.parsed(first.schema_id)  # cached by id


def test_normalize_stores_the_canonical_form(registry: SchemaRegistry) -> None:
    spaced = json.dumps(json.loads(V1), indent=2)
    plain = registry.register("a", spaced)
    assert registry.schema(plain.schema_id).text == spaced
    normalized = registry.register("b", record("Other", ("x", "int")), normalize=True)
    assert normalized.schema.text == registry.parsed(normalized.schema_id).canonical()
    registry.set_config("c", None, normalize=True)  # the subject's config asks for it too
    by_config = registry.register("c", json.dumps(json.loads(record("Third", ("y", "int"))), indent=1))
    assert "\n" not in by_config.schema.text


def test_backward_is_checked_under_the_lock(registry: SchemaRegistry) -> None:
    registry.register("s", V1)
    with pytest.raises(errors.IncompatibleSchema) as refused:
        registry.register("s", NO_DEFAULT)
    assert (refused.value.status, code_of(refused)) == (409, 409)
    assert refused.value.message.startswith("Incompatible schema, compatibility_mode=BACKWARD")
    assert registry.versions("s") == [1]  # nothing written
    registry.set_config("s", "none")
    assert registry.register("s", NO_DEFAULT).version == 2


def test_transitive_levels_check_every_live_version(
    registry: SchemaRegistry, metadata_store: MetadataStore
) -> None:
    registry.register("t", V1)
    registry.register("t", V2)
    registry.set_config("t", "BACKWARD_TRANSITIVE")
    with pytest.raises(errors.IncompatibleSchema):
        registry.register("t", V3_BREAKS_V1)
    assert registry.check_compatibility("t", None, V3_BREAKS_V1).is_compatible is False
    # A cache smaller than the versions checked: the registration keeps what it parsed itself.
    tiny = SchemaRegistry(metadata_store, default_formats(), cache_size=1)
    with pytest.raises(errors.IncompatibleSchema):
        tiny.register("t", V3_BREAKS_V1)
    assert (
        tiny.register(
            "t", record("User", ("name", "string"), ("age", "int"), ("z", "int"), age=0, z=0)
        ).version
        == 3
    )
    registry.set_config("t", "BACKWARD")  # only the latest: V3 reads V2's data
    assert registry.check_compatibility("t", None, V3_BREAKS_V1).is_compatible is True
    assert registry.register("t", V3_BREAKS_V1).version == 4


def test_compatibility_checks(registry: SchemaRegistry) -> None:
    with pytest.raises(errors.VersionNotFound):
        registry.check_compatibility("c", 1, V1)
    assert registry.check_compatibility("c", None, V1).is_compatible  # nothing to break
    registry.register("c", V1)
    assert registry.check_compatibility("c", "latest", V2).is_compatible
    result = registry.check_compatibility("c", 1, NO_DEFAULT)
    assert not result.is_compatible
    assert result.messages
    with pytest.raises(errors.InvalidVersion):
        registry.check_compatibility("c", "first", V2)
    registry.delete_version("c", 1)
    with pytest.raises(errors.VersionNotFound):
        registry.check_compatibility("c", 1, V2)  # soft-deleted: not a version to check against
    with pytest.raises(errors.InvalidSchema):
        registry.check_compatibility("c", None, '{"type": "nope"}')


def test_lookup(registry: SchemaRegistry) -> None:
    with pytest.raises(errors.SubjectNotFound):
        registry.lookup("l", V1)
    registered = registry.register("l", V1)
    assert registry.lookup("l", V1) == registered
    with pytest.raises(errors.SchemaNotFound):
        registry.lookup("l", V2)
    with pytest.raises(errors.InvalidSchema) as invalid:
        registry.lookup("l", '{"type": "invalid_type"}')
    assert invalid.value.message == "Error while looking up schema under subject l"
    registry.delete_subject("l")
    with pytest.raises(errors.SubjectNotFound):
        registry.lookup("l", V1)
    assert registry.lookup("l", V1, include_deleted=True).deleted


def test_versions_and_their_errors(registry: SchemaRegistry) -> None:
    registry.register("v", V1)
    registry.register("v", V2)
    assert registry.version("v", "latest").version == 2
    assert registry.version("v", -1).version == 2
    assert registry.version("v", "1").schema.text == V1
    for bad in ("0", "abc", 2**31, "1.5"):
        with pytest.raises(errors.InvalidVersion):
            registry.version("v", bad)
    with pytest.raises(errors.VersionNotFound) as missing:
        registry.version("v", 15)
    assert missing.value.message == "Version 15 not found."
    with pytest.raises(errors.SubjectNotFound) as no_subject:
        registry.version("nope", 1)
    assert no_subject.value.message == "Subject 'nope' not found."
    for bad_subject in ("", "a\nb", "tab\there", "__GLOBAL"):
        with pytest.raises(errors.InvalidSubject):
            registry.register(bad_subject, V1)
    assert registry.register("quotes\"{:}'/ok", V1).version == 1


def test_deletes_and_their_error_codes(registry: SchemaRegistry) -> None:
    registry.register("d", V1)
    registry.register("d", V2)
    with pytest.raises(errors.VersionNotSoftDeleted):
        registry.delete_version("d", 1, permanent=True)
    with pytest.raises(errors.SubjectNotSoftDeleted):
        registry.delete_subject("d", permanent=True)
    assert registry.delete_version("d", 1) == 1
    with pytest.raises(errors.VersionSoftDeleted):
        registry.delete_version("d", 1)
    assert registry.version("d", 1, include_deleted=True).deleted
    assert registry.delete_version("d", 1, permanent=True) == 1
    with pytest.raises(errors.VersionNotFound):
        registry.delete_version("d", 1, permanent=True)
    assert registry.delete_subject("d") == [2]
    with pytest.raises(errors.SubjectSoftDeleted):
        registry.delete_subject("d")
    assert registry.subjects() == []
    assert registry.subjects(include_deleted=True) == ["d"]
    with pytest.raises(errors.SubjectNotFound):
        registry.versions("d")
    assert registry.versions("d", include_deleted=True) == [2]
    # Soft-deleted: the id still resolves, and re-registering continues the numbering.
    id_v2 = registry.version("d", 2, include_deleted=True).schema_id
    assert registry.schema(id_v2).schema_id == id_v2
    assert registry.register("d", V2).version == 3
    registry.delete_subject("d")
    assert registry.delete_subject("d", permanent=True) == [2, 3]
    with pytest.raises(errors.SchemaNotFound):
        registry.schema(id_v2)
    with pytest.raises(errors.SubjectNotFound):
        registry.delete_subject("d")
    again = registry.register("d", V2)
    assert (again.version, again.schema_id) == (1, id_v2)  # gone: numbering restarts, the id comes back


def test_avro_references(registry: SchemaRegistry) -> None:
    address = registry.register("address", record("com.example.Address", ("street", "string")))
    ref = Reference("com.example.Address", "address", 1)
    user_text = record("com.example.User", ("name", "string"), ("home", "com.example.Address"))
    user = registry.register("user", user_text, references=[ref])
    assert user.schema.references == (ref,)
    assert registry.lookup("user", user_text, references=[ref]) == user
    latest = registry.register("user2", user_text, references=[Reference(ref.name, "address", -1)])
    assert latest.schema.references == (ref,)  # -1 is stored as the version it named
    assert latest.schema_id == user.schema_id
    assert registry.referenced_by("address", "latest") == [user.schema_id]
    with pytest.raises(errors.ReferenceExists) as referenced:
        registry.delete_version("address", 1)
    assert referenced.value.code == 42206
    with pytest.raises(errors.ReferenceExists):
        registry.delete_subject("address")
    with pytest.raises(errors.InvalidSchema):  # a reference to a version that does not exist
        registry.register("user3", user_text, references=[Reference(ref.name, "address", 7)])
    with pytest.raises(errors.InvalidSchema):  # the referenced name is unknown without the reference
        registry.register("user3", user_text)
    assert address.schema_id not in (user.schema_id,)


def test_json_schema(registry: SchemaRegistry) -> None:
    v1 = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}})
    narrowed = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})
    first = registry.register("j", v1, SchemaType.JSON)
    assert first.schema.schema_type is SchemaType.JSON
    with pytest.raises(errors.IncompatibleSchema):
        registry.register("j", narrowed, SchemaType.JSON)
    with pytest.raises(errors.IncompatibleSchema):  # another type is never compatible
        registry.register("j", V1, SchemaType.AVRO)
    assert registry.lookup("j", v1, SchemaType.JSON) == first


def test_protobuf_with_an_import_and_a_builtin(registry: SchemaRegistry) -> None:
    place = 'syntax = "proto3";\npackage a1;\nmessage Place {\n  string city = 1;\n}\n'
    place_id = registry.register("place", place, SchemaType.PROTOBUF).schema_id
    # As confluent-kafka's serializer registers it: a base64 FileDescriptorProto, the same schema.
    parsed = registry.parsed(place_id)
    assert isinstance(parsed, ProtobufSchema)
    descriptor = base64.b64encode(parsed.file.SerializeToString()).decode()
    assert registry.register("place-copy", descriptor, SchemaType.PROTOBUF).schema_id == place_id
    customer = (
        'syntax = "proto3";\npackage a1;\nimport "Place.proto";\nimport "google/protobuf/timestamp.proto";\n'
        "message Customer {\n  string name = 1;\n  Place place = 2;\n  google.protobuf.Timestamp at = 3;\n}\n"
    )
    ref = Reference("Place.proto", "place", 1)
    registered = registry.register("customer", customer, SchemaType.PROTOBUF, [ref])
    assert registered.schema.schema_type is SchemaType.PROTOBUF
    assert registry.referenced_by("place", 1) == [registered.schema_id]
    assert registry.parsed(registered.schema_id).record_names()[0] == "a1.Customer"
    renumbered = customer.replace("string name = 1", "int64 name = 1")
    assert not registry.check_compatibility(
        "customer", "latest", renumbered, SchemaType.PROTOBUF, [ref]
    ).is_compatible


def test_config(registry: SchemaRegistry) -> None:
    assert registry.config().compatibility == "BACKWARD"
    with pytest.raises(errors.SubjectLevelCompatibilityNotConfigured):
        registry.config("x")
    assert registry.config("x", default_to_global=True).compatibility == "BACKWARD"
    assert registry.set_config(None, "full").compatibility == "FULL"
    with pytest.raises(errors.InvalidCompatibilityLevel):
        registry.set_config(None, "nonexistentmode")
    assert registry.set_config("x", "NONE").compatibility == "NONE"
    assert registry.config("x").compatibility == "NONE"
    assert registry.delete_config("x").compatibility == "FULL"  # what is now in effect: the global level
    with pytest.raises(errors.SubjectLevelCompatibilityNotConfigured):
        registry.config("x")
    assert registry.delete_config(None).compatibility == "BACKWARD"


def test_read_only_modes(registry: SchemaRegistry) -> None:
    registry.register("r", V1)
    assert registry.mode() is Mode.READWRITE
    with pytest.raises(errors.SubjectLevelModeNotConfigured):
        registry.mode("r")
    assert registry.mode("r", default_to_global=True) is Mode.READWRITE
    registry.set_mode("r", "readonly")
    assert registry.mode("r") is Mode.READONLY
    for write in (
        lambda: registry.register("r", V1),  # even a schema registered already
        lambda: registry.register("r", V2),
        lambda: registry.delete_version("r", 1),
        lambda: registry.delete_subject("r"),
        lambda: registry.set_config("r", "NONE"),
    ):
        with pytest.raises(errors.OperationNotPermitted) as refused:
            write()
        assert refused.value.code == 42205
    assert registry.register("elsewhere", V1).version == 1
    assert registry.delete_mode("r") is Mode.READONLY
    registry.set_mode("r", "READWRITE")
    registry.set_mode(None, "READONLY_OVERRIDE")  # beats the subject's own READWRITE
    assert registry.mode("r") is Mode.READONLY_OVERRIDE
    with pytest.raises(errors.OperationNotPermitted):
        registry.register("r", V2)
    with pytest.raises(errors.InvalidMode):
        registry.set_mode(None, "SOMETIMES")
    registry.set_mode(None, "READWRITE")
    assert registry.register("r", V2).version == 2


def test_import_mode(registry: SchemaRegistry) -> None:
    registry.register("busy", V1)
    with pytest.raises(errors.OperationNotPermitted):
        registry.set_mode("busy", "IMPORT")  # a live version: only with force
    registry.set_mode("busy", "IMPORT", force=True)
    with pytest.raises(errors.OperationNotPermitted):
        registry.set_mode(None, "IMPORT")  # the registry has live versions
    registry.set_mode("imp", "IMPORT")
    with pytest.raises(errors.OperationNotPermitted):
        registry.register("imp", V1)  # IMPORT wants ids
    with pytest.raises(errors.OperationNotPermitted):
        registry.register("elsewhere", V1, schema_id=5)  # ids only in IMPORT mode
    imported = registry.register("imp", V2, schema_id=500, version=3)
    assert (imported.schema_id, imported.version) == (500, 3)
    assert registry.register("imp", V2, schema_id=500, version=3) == imported
    # IMPORT does not check compatibility.
    assert registry.register("imp", NO_DEFAULT, schema_id=501).version == 4
    with pytest.raises(errors.OperationNotPermitted) as other_schema:
        registry.register("imp", V3_BREAKS_V1, schema_id=500)
    assert other_schema.value.code == 42205
    with pytest.raises(errors.OperationNotPermitted):  # the same id and version, another schema
        registry.register("imp", V3_BREAKS_V1, schema_id=500, version=3)
    # A schema that has an id already gets the given one too, as Confluent's IMPORT does.
    first_id = registry.lookup("busy", V1).schema_id
    again = registry.register("imp", V1, schema_id=900)
    assert (again.schema_id, again.version) == (900, 5)
    assert registry.register("imp", V1, schema_id=900) == again
    assert registry.lookup("imp", V1).schema_id == 900
    registry.set_mode("imp", "READWRITE")
    assert registry.register("elsewhere-too", V1).schema_id == first_id
    registry.set_config("imp", "NONE")
    assert registry.register("imp", record("Fresh", ("f", "int"))).schema_id > 501  # past the imported ids


def test_two_agents_register_the_same_schema_once(
    two_registries: tuple[SchemaRegistry, SchemaRegistry],
) -> None:
    a, b = two_registries
    barrier = threading.Barrier(6)

    def run(i: int) -> VersionView:
        barrier.wait()
        return (a, b)[i % 2].register("shared", V1)

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(run, range(6)))
    assert len({(r.schema_id, r.version) for r in results}) == 1
    # b never parsed version 2, which a registers now: b's check under the lock finds it unparsed, parses
    # it outside, and registers against it.
    a.register("shared", V2)
    with pytest.raises(errors.IncompatibleSchema):
        b.register("shared", record("User", ("name", "string"), ("age", "int"), ("id", "long"), age=0))
    assert (
        b.register(
            "shared", record("User", ("name", "string"), ("age", "int"), ("x", "int"), age=0, x=1)
        ).version
        == 3
    )
