"""Bodies of the ACL and user routes (api/routes/security.py): Kafka's ACL bindings and SCRAM credentials in
JSON, with Kafka's names for every enum (``TOPIC``, ``PREFIXED``, ``READ``, ``ALLOW``, ``SCRAM-SHA-256``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from agents.scram import MAX_ITERATIONS, MIN_ITERATIONS
from storage.acl_model import AclBinding, Operation, PatternType, Permission, ResourceType

# SUBJECT: the schema registry's subjects, TABLE: the lake's Iceberg tables, Strata's own resource types
# (storage/acl_model.py).
ResourceName = Literal["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "SUBJECT", "TABLE"]
PatternName = Literal["LITERAL", "PREFIXED"]
OperationName = Literal[
    "ALL",
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
]
PermissionName = Literal["ALLOW", "DENY"]
# What a filter may also say: any value, and (pattern type) every binding that applies to the name.
ResourceFilter = Literal["ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "SUBJECT", "TABLE"]
PatternFilter = Literal["ANY", "MATCH", "LITERAL", "PREFIXED"]
OperationFilter = Literal[
    "ANY",
    "ALL",
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
]
PermissionFilter = Literal["ANY", "ALLOW", "DENY"]
Mechanism = Literal["SCRAM-SHA-256", "SCRAM-SHA-512"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class AclOut(BaseModel):
    resource_type: ResourceName
    resource_name: str
    pattern_type: PatternName
    principal: str
    host: str
    operation: OperationName
    permission: PermissionName


class AclIn(_Strict):
    resource_type: ResourceName
    resource_name: Annotated[StrictStr, Field(min_length=1, max_length=1000)]
    pattern_type: PatternName = "LITERAL"
    principal: Annotated[StrictStr, Field(min_length=1, max_length=1000, description="User:name or User:*")]
    host: Annotated[StrictStr, Field(min_length=1, max_length=255)] = "*"
    operation: OperationName
    permission: PermissionName = "ALLOW"

    def binding(self) -> AclBinding:
        return AclBinding(
            ResourceType[self.resource_type],
            self.resource_name,
            PatternType[self.pattern_type],
            self.principal,
            self.host,
            Operation[self.operation],
            Permission[self.permission],
        )


class AclsIn(_Strict):
    acls: Annotated[list[AclIn], Field(min_length=1, max_length=1000)]


class AclListOut(BaseModel):
    acls: list[AclOut]


class AclsCreatedOut(BaseModel):
    acls: list[AclOut]
    created: int = Field(description="how many of them were not stored already")


class AclsDeletedOut(BaseModel):
    deleted: list[AclOut]


def acl_out(b: AclBinding) -> AclOut:
    return AclOut(
        resource_type=b.resource_type.name,  # type: ignore[arg-type]
        resource_name=b.resource_name,
        pattern_type=b.pattern_type.name,  # type: ignore[arg-type]
        principal=b.principal,
        host=b.host,
        operation=b.operation.name,  # type: ignore[arg-type]
        permission=b.permission.name,  # type: ignore[arg-type]
    )


class CredentialOut(BaseModel):
    mechanism: Mechanism
    iterations: int


class UserOut(BaseModel):
    name: str
    credentials: list[CredentialOut]


class UserListOut(BaseModel):
    users: list[UserOut]


class ScramIn(_Strict):
    """A password (salted here with a fresh salt; send it over TLS), or, as Kafka's admin clients send it,
    the salt and the salted password (base64) the client computed, so that the server never sees it."""

    iterations: Annotated[StrictInt, Field(ge=MIN_ITERATIONS, le=MAX_ITERATIONS)] = MIN_ITERATIONS
    password: Annotated[StrictStr, Field(min_length=1, max_length=1000)] | None = Field(
        default=None, repr=False
    )
    salt: StrictStr | None = Field(default=None, description="base64")
    salted_password: StrictStr | None = Field(default=None, description="base64", repr=False)
