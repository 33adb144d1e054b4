"""Kafka's ACL model as values: bindings (one stored ACL), filters (what DescribeAcls and DeleteAcls match)
and the rules a new binding must follow.

The names and numbers are Kafka's (``org.apache.kafka.common.acl`` and ``.resource``), so the Kafka door
passes them through unchanged and the HTTP door shows the same words. A binding is (principal, host,
resource type, resource name, pattern type, operation, permission):
- principal ``User:name``, or ``User:*`` for every user;
- host ``*`` for every address, or one address compared with the client's;
- resource types TOPIC, GROUP, CLUSTER (whose only name is ``kafka-cluster``) and TRANSACTIONAL_ID, and
  Strata's own SUBJECT (the schema registry's subjects), which Kafka does not have: the Kafka door never
  shows, takes or matches it (``KAFKA_RESOURCES``, ``kafka_resource``, ``AclFilter.kafka``), the HTTP door
  and the principals file do; and Strata's own TABLE (the lake's Iceberg tables, named
  ``<namespace>.<table>``, which the agents' read-only Iceberg REST catalog serves), likewise;
- pattern LITERAL (the name, or ``*`` for every name) or PREFIXED (every name starting with it);
- permission ALLOW or DENY.
What a binding means for a request (deny wins, implications) is agents/acl.py's; this module only says
what a binding is and which ones a filter selects, which the metadata store needs as much as the agents.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from storage.errors import BadRequest

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
USER = "User:"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    # Not Kafka's: a number far above Kafka's own (DELEGATION_TOKEN 6, USER 7), which Kafka's admin clients
    # would read as UNKNOWN.
    SUBJECT = 100
    TABLE = 101


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type, the name compared exactly
    MATCH = 2  # filters only: every binding that would apply to the name
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


# The resource types of Kafka's ACLs: all the Kafka door knows.
KAFKA_RESOURCES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)
# The values a stored binding may hold (the others exist for filters).
BINDABLE_RESOURCES = (*KAFKA_RESOURCES, ResourceType.SUBJECT, ResourceType.TABLE)
BINDABLE_PATTERNS = (PatternType.LITERAL, PatternType.PREFIXED)
BINDABLE_OPERATIONS = tuple(op for op in Operation if op not in (Operation.UNKNOWN, Operation.ANY))
BINDABLE_PERMISSIONS = (Permission.DENY, Permission.ALLOW)


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission


def validate_binding(binding: AclBinding) -> AclBinding:
    """BadRequest (Kafka's INVALID_REQUEST) for a binding Kafka's controller would refuse to store."""
    if binding.resource_type not in BINDABLE_RESOURCES:
        raise BadRequest(f"invalid resource type {_name(ResourceType, binding.resource_type)}")
    if binding.pattern_type not in BINDABLE_PATTERNS:
        raise BadRequest(f"invalid pattern type {_name(PatternType, binding.pattern_type)}")
    if binding.operation not in BINDABLE_OPERATIONS:
        raise BadRequest(f"invalid operation {_name(Operation, binding.operation)}")
    if binding.permission not in BINDABLE_PERMISSIONS:
        raise BadRequest(f"invalid permission type {_name(Permission, binding.permission)}")
    if not binding.resource_name:
        raise BadRequest("resource name should not be empty")
    if binding.resource_type is ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        raise BadRequest(f"the only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if ":" not in binding.principal:
        raise BadRequest(
            f"could not parse principal from {binding.principal!r} (no colon separates the principal type "
            "from the principal name)"
        )
    if not binding.host:
        raise BadRequest("host should not be empty: '*' is every host")
    for text in (binding.resource_name, binding.principal, binding.host):
        if "\x00" in text or not _encodable(text):
            raise BadRequest("resource names, principals and hosts must be UTF-8 text without NUL")
    return binding


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, which JSON can carry and UTF-8 cannot
        return False
    return True


E = TypeVar("E", ResourceType, PatternType, Operation, Permission)


def coerce(enum: type[E], value: int) -> E:
    """A number from a client as one of the enum's values: UNKNOWN (0) for a number Strata does not know
    (a newer Kafka's resource type or operation), which validation then refuses."""
    try:
        return enum(value)
    except ValueError:
        return enum(0)


def kafka_resource(value: int) -> ResourceType:
    """A resource type number from a Kafka client: ``coerce``, and UNKNOWN for SUBJECT and TABLE too, which
    are not Kafka's (a binding or filter naming one is refused as Kafka refuses a type it does not know)."""
    found = coerce(ResourceType, value)
    return found if found in (*KAFKA_RESOURCES, ResourceType.ANY) else ResourceType.UNKNOWN


def _name(enum: type[IntEnum], value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return str(value)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AclBindingFilter: None (or ANY) matches every value of a field."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY
    # The Kafka door's filter: it matches Kafka's resource types only, so that DescribeAcls and DeleteAcls
    # (which match ANY type) never show or delete a SUBJECT binding.
    kafka: bool = False

    def check(self) -> AclFilter:
        """BadRequest for a filter with an UNKNOWN field (Kafka's ``isUnknown``: INVALID_REQUEST)."""
        unknown = [
            label
            for label, value in (
                ("resource type", self.resource_type),
                ("pattern type", self.pattern_type),
                ("operation", self.operation),
                ("permission type", self.permission),
            )
            if value == 0
        ]
        if unknown:
            raise BadRequest(f"the filter has an unknown {', '.join(unknown)}")
        return self

    def matches(self, b: AclBinding) -> bool:
        """Kafka's ResourcePatternFilter.matches and AccessControlEntryFilter.matches together."""
        if self.kafka and b.resource_type not in KAFKA_RESOURCES:
            return False
        if self.resource_type is not ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if (
            self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
            and self.pattern_type != b.pattern_type
        ):
            return False
        if self.resource_name is not None:
            if self.pattern_type in (PatternType.ANY, b.pattern_type):
                if self.resource_name != b.resource_name:
                    return False
            elif b.pattern_type is PatternType.LITERAL:  # MATCH: the bindings that apply to this name
                if b.resource_name not in (self.resource_name, WILDCARD):
                    return False
            elif not self.resource_name.startswith(b.resource_name):
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation is not Operation.ANY and self.operation != b.operation:
            return False
        return self.permission is Permission.ANY or self.permission == b.permission


def user_principal(name: str) -> str:
    """The ACL principal of an authenticated user: ``User:name``."""
    return USER + name
