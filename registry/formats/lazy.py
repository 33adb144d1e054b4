"""The schema formats by type, each format's module imported when a schema of its type is first parsed.

Why: the formats' libraries (protobuf's runtime and its compiler, avro and fastavro, jsonschema) take about
40 MiB of a process's memory and most of its start-up imports. An agent whose records name no schema, and a
registry that holds schemas of one type, never load the others. Modules that dispatch on a parsed schema's
class (``api/typed_records.py``, ``api/typed_produce.py``) import the format modules inside the function
for the same reason: by then a schema of that type was parsed, so the import is a lookup.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import cast

from registry.formats.base import SchemaFormat, SchemaType

# Each module defines FORMAT, its SchemaFormat.
_MODULES = {
    SchemaType.AVRO: "registry.formats.avro",
    SchemaType.JSON: "registry.formats.jsonschema",
    SchemaType.PROTOBUF: "registry.formats.protobuf",
}


class LazyFormats(Mapping[SchemaType, SchemaFormat]):
    """Every format this registry reads, by type; a format's module is imported on its first lookup."""

    def __getitem__(self, schema_type: SchemaType) -> SchemaFormat:
        return cast(SchemaFormat, importlib.import_module(_MODULES[schema_type]).FORMAT)

    def __iter__(self) -> Iterator[SchemaType]:
        return iter(_MODULES)

    def __len__(self) -> int:
        return len(_MODULES)


__all__ = ["LazyFormats"]
