"""The bodies the registry's routes take, as Confluent's API defines them, validated by pydantic: a body that
does not fit is 422 with pydantic's errors (api/registry/errors.py), as Karapace's tests pin it.

Fields Strata does not act on (``metadata``, ``ruleSet``, schema tags, a config's ``alias`` ...) are
accepted and ignored, as Confluent's servers before data contracts ignored them, so that a newer client's
request does not fail on them.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator

from registry.formats.base import Reference, SchemaType


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class ReferenceIn(_Body):
    name: StrictStr
    subject: StrictStr
    version: StrictInt = Field(description="a version number, or -1 for the latest")

    def reference(self) -> Reference:
        return Reference(self.name, self.subject, self.version)


class SchemaIn(_Body):
    """A schema to register, look up or check (POST /subjects/{s}/versions, /subjects/{s}, /compatibility)."""

    schema_text: StrictStr = Field(alias="schema")
    schema_type: SchemaType = Field(alias="schemaType", default=SchemaType.AVRO)
    references: list[ReferenceIn] | None = None
    # IMPORT mode: the id the schema keeps, and optionally its version.
    id: Annotated[StrictInt, Field(ge=1)] | None = None
    version: Annotated[StrictInt, Field(ge=1)] | None = None
    metadata: Any = None
    rule_set: Any = Field(alias="ruleSet", default=None)

    @field_validator("schema_type", mode="before")
    @classmethod
    def _type_any_case(cls, value: object) -> object:
        # Confluent reads the type case-insensitively; an unknown one fails validation (422, as Karapace).
        return value.upper() if isinstance(value, str) else value

    def refs(self) -> tuple[Reference, ...]:
        return tuple(r.reference() for r in self.references or ())


class ConfigIn(_Body):
    """PUT /config and /config/{s}: a level and/or whether registrations normalize."""

    compatibility: StrictStr | None = None
    # What GET answers with; some clients send it back as it came.
    compatibility_level: StrictStr | None = Field(alias="compatibilityLevel", default=None)
    normalize: StrictBool | None = None

    def level(self) -> str | None:
        return self.compatibility if self.compatibility is not None else self.compatibility_level


class ModeIn(_Body):
    mode: StrictStr
