"""The one permission table: for every Kafka API the listener advertises, every HTTP route, every route of
the schema registry and every route of the Iceberg REST catalog, the permission(s) it needs, as Kafka
names them (resource type, operation, where the resource name comes from).

Call sites never name an operation: a handler or route takes its ``Need`` from here (``KAFKA[key].need``,
``HTTP[method, path].need``, ``REGISTRY[method, path].need``, ``ICEBERG[method, path].need``) and asks the
door's context whether the request's principal has it. So what this table says is what is enforced, and
the tests walk it (tests/kafka/test_permission_table.py, tests/integration/test_permission_table_http.py,
tests/integration/test_registry_permissions.py, tests/integration/test_iceberg_permissions.py): every
advertised API and every route has an entry, and for each need a principal holding every other
permission is denied.

The Kafka entries follow Kafka's own (KafkaApis and the table of operations per protocol in Kafka's
authorization documentation). The HTTP routes take the Kafka API they correspond to: produce is
Produce's WRITE, reading records is Fetch's READ, offsets are ListOffsets' DESCRIBE, a group's offsets
OffsetCommit's and OffsetFetch's, and the cluster views DescribeCluster's DESCRIBE on the cluster.

The registry's routes (api/registry/) take subjects as a resource, SUBJECT, which is Strata's and not
Kafka's: reading a schema or a version is READ on its subject, listing names DESCRIBE, registering and
checking compatibility WRITE, deleting DELETE, a subject's config and mode DESCRIBE_CONFIGS and
ALTER_CONFIGS; the global config and mode are the cluster's configs. A schema asked for by id or guid
belongs to no one subject: READ on any subject with a version of it allows it.

The Iceberg catalog's routes (api/iceberg/) take the lake's tables as a resource, TABLE, Strata's own too,
named ``<namespace>.<table>`` (the identifier as Iceberg prints it): loading a table is READ on it, asking
whether it exists DESCRIBE, and a listing shows the tables DESCRIBE allows. Why the table and not the topic
it comes from: a table is the catalog's object, named by the catalog. Its name maps from the topic's in a
way that cannot be inverted (``.`` and ``-`` both become ``_``), or is set freely by a topic config, and
one topic has several tables (the upsert ``_state`` table, the dead-letter table), so a check by topic
would need each table's metadata file read from the object store first, for every table of a listing.
With TABLE, a grant is made per table or by prefix (``strata.`` for every table of the namespace), a
listing is filtered on names alone, and the catalog does not depend on how the writer names its tables.
A Kafka user who reads a topic is therefore granted its table separately. The catalog's config and its
namespaces name no data and are open to any authenticated principal; its writes are refused to everyone.

A need either refuses (the request, or the one topic or group of it the need names, answers the
resource's *_AUTHORIZATION_FAILED code or HTTP 403) or ``filters``: what it does not allow is left out of
a listing, as Kafka's Metadata leaves out topics one may not describe. An entry with no need is open, and
says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum

from storage.acl_model import Operation, ResourceType

TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, SUBJECT, TABLE = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.SUBJECT,
    ResourceType.TABLE,
)


class ApiKey(IntEnum):
    """The Kafka APIs Strata serves (broker/apis.py advertises exactly these)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66


class Name(Enum):
    """Where the resource name of a need comes from."""

    TOPIC = "each topic the request names"
    GROUP = "the group the request names"
    CLUSTER = "the cluster (kafka-cluster)"
    TRANSACTIONAL_ID = "the transactional id"
    SOME_TOPIC = "any topic: some topic name allows it (Kafka's authorizeByResourceType, KIP-679)"
    SUBJECT = "the registry subject the request names"
    SCHEMA_SUBJECT = (
        "a subject with a version of the schema the request names: one of them allowing is enough"
    )
    TABLE = "the lake table the request names (<namespace>.<table>)"


@dataclass(frozen=True, slots=True)
class Need:
    resource: ResourceType
    operation: Operation
    name: Name
    # Left out of a listing where denied, instead of refused.
    filters: bool = False
    # Also allowed by this need (Kafka's CreateTopics: CREATE on the cluster or on the topic).
    alternative: Need | None = None
    # Tells apart two needs of one entry on the same resource type ("" where there is one).
    key: str = ""

    def describe(self) -> str:
        text = f"{self.operation.name} on {self.resource.name} ({self.name.value})"
        if self.alternative is not None:
            text += f", or {self.alternative.describe()}"
        return text + (": filters" if self.filters else "")


@dataclass(frozen=True, slots=True)
class Rule:
    needs: tuple[Need, ...] = ()
    # Why an entry without needs is open: to any authenticated principal, or (``unauthenticated``) to
    # anyone at all.
    open: str = ""
    unauthenticated: bool = False

    def __post_init__(self) -> None:
        refusing = [n for n in self.needs if not n.filters]
        if (refusing and self.open) or not (self.needs or self.open):
            raise ValueError("an entry has needs that refuse, or says why it is open; not both, not neither")

    def need(self, resource: ResourceType, key: str = "") -> Need:
        """This entry's need on ``resource`` (with ``key``, where two needs share a resource type)."""
        found = [n for n in self.needs if n.resource is resource and n.key == key]
        if len(found) != 1:
            raise KeyError(f"{len(found)} needs on {resource.name} {key!r} in {self}")
        return found[0]


def needs(*items: Need) -> Rule:
    return Rule(items)


def open_to_any(reason: str) -> Rule:
    return Rule(open=reason)


def _n(
    resource: ResourceType,
    op: Operation,
    name: Name,
    *,
    filters: bool = False,
    alternative: Need | None = None,
    key: str = "",
) -> Need:
    return Need(resource, op, name, filters, alternative, key)


Op = Operation
# Keys of the second need on one resource type: Metadata's auto-creation, a described topic's configs.
AUTO_CREATE = "auto-create"
CONFIGS = "configs"
_CREATE_TOPIC = _n(TOPIC, Op.CREATE, Name.TOPIC, alternative=_n(CLUSTER, Op.CREATE, Name.CLUSTER))

KAFKA: dict[int, Rule] = {
    ApiKey.PRODUCE: needs(
        _n(TOPIC, Op.WRITE, Name.TOPIC), _n(TRANSACTIONAL_ID, Op.WRITE, Name.TRANSACTIONAL_ID)
    ),
    ApiKey.FETCH: needs(_n(TOPIC, Op.READ, Name.TOPIC)),
    ApiKey.LIST_OFFSETS: needs(_n(TOPIC, Op.DESCRIBE, Name.TOPIC)),
    # Topics not named are listed only where DESCRIBE allows; a named one that does not exist is created
    # (auto.create.topics.enable) only with CREATE.
    ApiKey.METADATA: needs(
        _n(TOPIC, Op.DESCRIBE, Name.TOPIC),
        _n(TOPIC, Op.CREATE, Name.TOPIC, alternative=_n(CLUSTER, Op.CREATE, Name.CLUSTER), key=AUTO_CREATE),
    ),
    ApiKey.OFFSET_COMMIT: needs(_n(GROUP, Op.READ, Name.GROUP), _n(TOPIC, Op.READ, Name.TOPIC)),
    ApiKey.OFFSET_FETCH: needs(
        _n(GROUP, Op.DESCRIBE, Name.GROUP), _n(TOPIC, Op.DESCRIBE, Name.TOPIC, filters=True)
    ),
    ApiKey.FIND_COORDINATOR: needs(
        _n(GROUP, Op.DESCRIBE, Name.GROUP), _n(TRANSACTIONAL_ID, Op.DESCRIBE, Name.TRANSACTIONAL_ID)
    ),
    ApiKey.JOIN_GROUP: needs(_n(GROUP, Op.READ, Name.GROUP)),
    ApiKey.HEARTBEAT: needs(_n(GROUP, Op.READ, Name.GROUP)),
    ApiKey.LEAVE_GROUP: needs(_n(GROUP, Op.READ, Name.GROUP)),
    ApiKey.SYNC_GROUP: needs(_n(GROUP, Op.READ, Name.GROUP)),
    ApiKey.DESCRIBE_GROUPS: needs(_n(GROUP, Op.DESCRIBE, Name.GROUP)),
    ApiKey.LIST_GROUPS: needs(
        _n(GROUP, Op.DESCRIBE, Name.GROUP, filters=True, alternative=_n(CLUSTER, Op.DESCRIBE, Name.CLUSTER))
    ),
    ApiKey.SASL_HANDSHAKE: open_to_any("authentication itself: served before a principal is known"),
    ApiKey.API_VERSIONS: open_to_any("what the listener serves: asked before authenticating"),
    ApiKey.CREATE_TOPICS: needs(_CREATE_TOPIC),
    ApiKey.DELETE_TOPICS: needs(_n(TOPIC, Op.DELETE, Name.TOPIC)),
    ApiKey.DELETE_RECORDS: needs(_n(TOPIC, Op.DELETE, Name.TOPIC)),
    ApiKey.INIT_PRODUCER_ID: needs(
        _n(CLUSTER, Op.IDEMPOTENT_WRITE, Name.CLUSTER, alternative=_n(TOPIC, Op.WRITE, Name.SOME_TOPIC)),
        _n(TRANSACTIONAL_ID, Op.WRITE, Name.TRANSACTIONAL_ID),
    ),
    ApiKey.ADD_PARTITIONS_TO_TXN: needs(
        _n(TRANSACTIONAL_ID, Op.WRITE, Name.TRANSACTIONAL_ID), _n(TOPIC, Op.WRITE, Name.TOPIC)
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: needs(
        _n(TRANSACTIONAL_ID, Op.WRITE, Name.TRANSACTIONAL_ID), _n(GROUP, Op.READ, Name.GROUP)
    ),
    ApiKey.END_TXN: needs(_n(TRANSACTIONAL_ID, Op.WRITE, Name.TRANSACTIONAL_ID)),
    ApiKey.TXN_OFFSET_COMMIT: needs(
        _n(TRANSACTIONAL_ID, Op.WRITE, Name.TRANSACTIONAL_ID),
        _n(GROUP, Op.READ, Name.GROUP),
        _n(TOPIC, Op.READ, Name.TOPIC),
    ),
    ApiKey.DESCRIBE_ACLS: needs(_n(CLUSTER, Op.DESCRIBE, Name.CLUSTER)),
    ApiKey.CREATE_ACLS: needs(_n(CLUSTER, Op.ALTER, Name.CLUSTER)),
    ApiKey.DELETE_ACLS: needs(_n(CLUSTER, Op.ALTER, Name.CLUSTER)),
    ApiKey.DESCRIBE_CONFIGS: needs(
        _n(TOPIC, Op.DESCRIBE_CONFIGS, Name.TOPIC), _n(CLUSTER, Op.DESCRIBE_CONFIGS, Name.CLUSTER)
    ),
    ApiKey.ALTER_CONFIGS: needs(
        _n(TOPIC, Op.ALTER_CONFIGS, Name.TOPIC), _n(CLUSTER, Op.ALTER_CONFIGS, Name.CLUSTER)
    ),
    ApiKey.SASL_AUTHENTICATE: open_to_any("authentication itself: served before a principal is known"),
    ApiKey.CREATE_PARTITIONS: needs(_n(TOPIC, Op.ALTER, Name.TOPIC)),
    ApiKey.DELETE_GROUPS: needs(_n(GROUP, Op.DELETE, Name.GROUP)),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: needs(
        _n(TOPIC, Op.ALTER_CONFIGS, Name.TOPIC), _n(CLUSTER, Op.ALTER_CONFIGS, Name.CLUSTER)
    ),
    ApiKey.OFFSET_DELETE: needs(_n(GROUP, Op.DELETE, Name.GROUP), _n(TOPIC, Op.READ, Name.TOPIC)),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: needs(_n(CLUSTER, Op.DESCRIBE, Name.CLUSTER)),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: needs(_n(CLUSTER, Op.ALTER, Name.CLUSTER)),
    ApiKey.DESCRIBE_CLUSTER: needs(_n(CLUSTER, Op.DESCRIBE, Name.CLUSTER)),
    ApiKey.DESCRIBE_PRODUCERS: needs(_n(TOPIC, Op.READ, Name.TOPIC)),
    ApiKey.DESCRIBE_TRANSACTIONS: needs(
        _n(TRANSACTIONAL_ID, Op.DESCRIBE, Name.TRANSACTIONAL_ID),
        _n(TOPIC, Op.DESCRIBE, Name.TOPIC, filters=True),
    ),
    ApiKey.LIST_TRANSACTIONS: needs(_n(TRANSACTIONAL_ID, Op.DESCRIBE, Name.TRANSACTIONAL_ID, filters=True)),
}

_T = "/v1/topics/{topic}"
_P = _T + "/partitions/{partition}"
_G = "/v1/groups/{group}"
_CLUSTER_DESCRIBE = needs(_n(CLUSTER, Op.DESCRIBE, Name.CLUSTER))
_CLUSTER_ALTER = needs(_n(CLUSTER, Op.ALTER, Name.CLUSTER))
_PROBE = Rule(
    open="a probe or scrape: load balancers and Prometheus call it without credentials", unauthenticated=True
)
# Why the agent is not ready (the metadata store's error, which names where it is) only to a principal
# that may describe the cluster; anyone else learns only that it is not.
_READY = Rule(
    (_n(CLUSTER, Op.DESCRIBE, Name.CLUSTER, filters=True),),
    open="a probe: load balancers call it without credentials",
    unauthenticated=True,
)
_PAGE = open_to_any("the console and the API's documentation: static, and every call they make is checked")

# (method, path template) -> the route's rule. Mounted static files are keyed by their mount path.
HTTP: dict[tuple[str, str], Rule] = {
    ("GET", "/healthz"): _PROBE,
    ("GET", "/readyz"): _READY,
    ("GET", "/metrics"): _PROBE,
    ("GET", "/openapi.json"): _PAGE,
    ("GET", "/docs"): _PAGE,
    ("GET", "/docs/oauth2-redirect"): _PAGE,
    ("GET", "/redoc"): _PAGE,
    ("GET", "/ui"): _PAGE,
    ("GET", "/ui/"): _PAGE,
    ("GET", "/ui/assets"): _PAGE,
    ("POST", "/v1/topics"): needs(_CREATE_TOPIC),
    ("GET", "/v1/topics"): needs(_n(TOPIC, Op.DESCRIBE, Name.TOPIC, filters=True)),
    ("GET", _T): needs(
        _n(TOPIC, Op.DESCRIBE, Name.TOPIC),
        _n(TOPIC, Op.DESCRIBE_CONFIGS, Name.TOPIC, filters=True, key=CONFIGS),
    ),
    ("PATCH", _T + "/configs"): needs(_n(TOPIC, Op.ALTER_CONFIGS, Name.TOPIC)),
    ("POST", _T + "/partitions"): needs(_n(TOPIC, Op.ALTER, Name.TOPIC)),
    ("DELETE", _T): needs(_n(TOPIC, Op.DELETE, Name.TOPIC)),
    ("POST", _T + "/compact"): needs(_n(TOPIC, Op.ALTER, Name.TOPIC)),
    ("POST", _T + "/records"): needs(_n(TOPIC, Op.WRITE, Name.TOPIC)),
    ("GET", _P + "/records"): needs(_n(TOPIC, Op.READ, Name.TOPIC)),
    ("DELETE", _P + "/records"): needs(_n(TOPIC, Op.DELETE, Name.TOPIC)),
    ("GET", _P + "/offsets"): needs(_n(TOPIC, Op.DESCRIBE, Name.TOPIC)),
    ("GET", _T + "/browse"): needs(_n(TOPIC, Op.READ, Name.TOPIC)),
    ("GET", _T + "/partitions"): needs(_n(TOPIC, Op.DESCRIBE, Name.TOPIC)),
    ("GET", _T + "/compaction"): needs(_n(TOPIC, Op.DESCRIBE, Name.TOPIC)),
    # The lake (api/routes/lake.py): a table's status is its topic's DESCRIBE, as describing the topic
    # (its mode, table and commit interval are what the status is about, so DESCRIBE_CONFIGS is not asked;
    # no other config is shown); asking for a commit now is its ALTER, as compacting now is.
    ("GET", "/v1/lake"): needs(_n(TOPIC, Op.DESCRIBE, Name.TOPIC, filters=True)),
    ("GET", _T + "/lake"): needs(_n(TOPIC, Op.DESCRIBE, Name.TOPIC)),
    ("POST", _T + "/lake/commit-now"): needs(_n(TOPIC, Op.ALTER, Name.TOPIC)),
    # Jobs of topics one may not describe are left out; asking for one such topic is refused.
    ("GET", "/v1/compaction/jobs"): needs(_n(TOPIC, Op.DESCRIBE, Name.TOPIC, filters=True)),
    ("GET", "/v1/groups"): needs(_n(GROUP, Op.DESCRIBE, Name.GROUP, filters=True)),
    ("GET", _G): needs(_n(GROUP, Op.DESCRIBE, Name.GROUP), _n(TOPIC, Op.DESCRIBE, Name.TOPIC, filters=True)),
    ("PUT", _G + "/offsets"): needs(_n(GROUP, Op.READ, Name.GROUP), _n(TOPIC, Op.READ, Name.TOPIC)),
    ("GET", _G + "/offsets"): needs(
        _n(GROUP, Op.DESCRIBE, Name.GROUP), _n(TOPIC, Op.DESCRIBE, Name.TOPIC, filters=True)
    ),
    ("POST", _G + "/offsets/reset"): needs(_n(GROUP, Op.READ, Name.GROUP), _n(TOPIC, Op.READ, Name.TOPIC)),
    ("GET", "/v1/transactions"): needs(
        _n(TRANSACTIONAL_ID, Op.DESCRIBE, Name.TRANSACTIONAL_ID, filters=True),
        _n(TOPIC, Op.DESCRIBE, Name.TOPIC, filters=True),
    ),
    # As kafka-transactions --abort: the producer's own permission on its id (Kafka's tool also needs
    # WRITE on the topics, for the markers WriteTxnMarkers writes; here the coordinator writes them).
    ("POST", "/v1/transactions/{transactional_id}/abort"): needs(
        _n(TRANSACTIONAL_ID, Op.WRITE, Name.TRANSACTIONAL_ID)
    ),
    ("GET", "/v1/cluster"): _CLUSTER_DESCRIBE,
    ("GET", "/v1/metrics/history"): _CLUSTER_DESCRIBE,
    ("GET", "/v1/acls"): _CLUSTER_DESCRIBE,
    ("POST", "/v1/acls"): _CLUSTER_ALTER,
    ("DELETE", "/v1/acls"): _CLUSTER_ALTER,
    ("GET", "/v1/users"): _CLUSTER_DESCRIBE,
    ("PUT", "/v1/users/{user}/scram/{mechanism}"): _CLUSTER_ALTER,
    ("DELETE", "/v1/users/{user}/scram/{mechanism}"): _CLUSTER_ALTER,
}

# Paths open without authentication (the middleware lets them through without credentials).
UNAUTHENTICATED_PATHS = frozenset(path for (_, path), rule in HTTP.items() if rule.unauthenticated)

_S = "/subjects/{subject}"
_V = _S + "/versions/{version}"
_SR_PROBE = Rule(
    open="a probe: load balancers and Karapace's test suite call it without credentials", unauthenticated=True
)
_SR_STATIC = open_to_any("what the registry is (its formats, contexts, version and cluster id): no data")
_SCHEMA_READ = needs(_n(SUBJECT, Op.READ, Name.SCHEMA_SUBJECT))
_SUBJECT_READ = needs(_n(SUBJECT, Op.READ, Name.SUBJECT))
_SUBJECT_WRITE = needs(_n(SUBJECT, Op.WRITE, Name.SUBJECT))
_SUBJECT_DELETE = needs(_n(SUBJECT, Op.DELETE, Name.SUBJECT))
_SUBJECT_DESCRIBE = needs(_n(SUBJECT, Op.DESCRIBE, Name.SUBJECT))
_SUBJECTS_LISTED = needs(_n(SUBJECT, Op.DESCRIBE, Name.SUBJECT, filters=True))
_SUBJECT_CONFIGS = needs(_n(SUBJECT, Op.DESCRIBE_CONFIGS, Name.SUBJECT))
_SUBJECT_ALTER_CONFIGS = needs(_n(SUBJECT, Op.ALTER_CONFIGS, Name.SUBJECT))
_GLOBAL_CONFIGS = needs(_n(CLUSTER, Op.DESCRIBE_CONFIGS, Name.CLUSTER))
_GLOBAL_ALTER_CONFIGS = needs(_n(CLUSTER, Op.ALTER_CONFIGS, Name.CLUSTER))

# The schema registry's routes (api/registry/), by (method, path template) as its own app routes them.
REGISTRY: dict[tuple[str, str], Rule] = {
    ("GET", "/"): _SR_PROBE,
    ("GET", "/_health"): _SR_PROBE,
    ("GET", "/master_available"): _SR_PROBE,
    ("GET", "/schemas/types"): _SR_STATIC,
    ("GET", "/contexts"): _SR_STATIC,
    ("GET", "/v1/metadata/id"): _SR_STATIC,
    ("GET", "/v1/metadata/version"): _SR_STATIC,
    ("GET", "/schemas"): needs(_n(SUBJECT, Op.READ, Name.SUBJECT, filters=True)),
    ("GET", "/schemas/ids/{schema_id}"): _SCHEMA_READ,
    ("GET", "/schemas/ids/{schema_id}/schema"): _SCHEMA_READ,
    ("GET", "/schemas/ids/{schema_id}/subjects"): _SUBJECTS_LISTED,
    ("GET", "/schemas/ids/{schema_id}/versions"): _SUBJECTS_LISTED,
    ("GET", "/schemas/guids/{guid}"): _SCHEMA_READ,
    ("GET", "/schemas/guids/{guid}/ids"): _SCHEMA_READ,
    ("GET", "/subjects"): _SUBJECTS_LISTED,
    ("POST", _S): _SUBJECT_READ,  # lookup
    ("DELETE", _S): _SUBJECT_DELETE,
    ("GET", _S + "/versions"): _SUBJECT_DESCRIBE,
    ("POST", _S + "/versions"): _SUBJECT_WRITE,  # register
    ("GET", _V): _SUBJECT_READ,
    ("DELETE", _V): _SUBJECT_DELETE,
    ("GET", _V + "/schema"): _SUBJECT_READ,
    ("GET", _V + "/referencedby"): _SUBJECT_READ,
    # A check is a registration that stops short of storing: the same permission.
    ("POST", "/compatibility" + _V): _SUBJECT_WRITE,
    ("POST", "/compatibility" + _S + "/versions"): _SUBJECT_WRITE,
    ("GET", "/config"): _GLOBAL_CONFIGS,
    ("PUT", "/config"): _GLOBAL_ALTER_CONFIGS,
    ("DELETE", "/config"): _GLOBAL_ALTER_CONFIGS,
    ("GET", "/config/{subject}"): _SUBJECT_CONFIGS,
    ("PUT", "/config/{subject}"): _SUBJECT_ALTER_CONFIGS,
    ("DELETE", "/config/{subject}"): _SUBJECT_ALTER_CONFIGS,
    ("GET", "/mode"): _GLOBAL_CONFIGS,
    ("PUT", "/mode"): _GLOBAL_ALTER_CONFIGS,
    ("DELETE", "/mode"): _GLOBAL_ALTER_CONFIGS,
    ("GET", "/mode/{subject}"): _SUBJECT_CONFIGS,
    ("PUT", "/mode/{subject}"): _SUBJECT_ALTER_CONFIGS,
    ("DELETE", "/mode/{subject}"): _SUBJECT_ALTER_CONFIGS,
}

# The registry's paths open without authentication.
REGISTRY_UNAUTHENTICATED_PATHS = frozenset(
    path for (_, path), rule in REGISTRY.items() if rule.unauthenticated
)


_NS = "/v1/namespaces/{namespace}"
_TB = _NS + "/tables/{table}"
_CATALOG = open_to_any("the catalog's config and its namespaces: names and locations, no table data")
# Kept as routes so that a write meets the REST spec's refusal (406 UnsupportedOperationException), not a
# 404 or 405 that a client would read as a missing endpoint.
_READ_ONLY = open_to_any("a write, refused to everyone: the catalog is read-only, the lake's writer commits")

# The Iceberg REST catalog's routes (api/iceberg/), by (method, path template) as its own app routes them
# (under /iceberg on the HTTP port). HEAD is keyed apart: it asks less than GET.
ICEBERG: dict[tuple[str, str], Rule] = {
    ("GET", "/v1/config"): _CATALOG,
    ("GET", "/v1/namespaces"): _CATALOG,
    ("GET", _NS): _CATALOG,
    ("HEAD", _NS): _CATALOG,
    ("GET", _NS + "/tables"): needs(_n(TABLE, Op.DESCRIBE, Name.TABLE, filters=True)),
    ("GET", _TB): needs(_n(TABLE, Op.READ, Name.TABLE)),
    ("HEAD", _TB): needs(_n(TABLE, Op.DESCRIBE, Name.TABLE)),
    ("POST", "/v1/namespaces"): _READ_ONLY,
    ("DELETE", _NS): _READ_ONLY,
    ("POST", _NS + "/properties"): _READ_ONLY,
    ("POST", _NS + "/tables"): _READ_ONLY,
    ("POST", _NS + "/register"): _READ_ONLY,
    ("POST", _TB): _READ_ONLY,
    ("DELETE", _TB): _READ_ONLY,
    ("POST", _TB + "/metrics"): _READ_ONLY,
    ("POST", "/v1/tables/rename"): _READ_ONLY,
    ("POST", "/v1/transactions/commit"): _READ_ONLY,
}


def route(method: str, path: str) -> Rule:
    """A route's rule; KeyError for a route the table does not know (a route added without an entry)."""
    return HTTP[(method, path)]


def registry_route(method: str, path: str) -> Rule:
    """A registry route's rule; KeyError for a route the table does not know."""
    return REGISTRY[(method, path)]


def iceberg_route(method: str, path: str) -> Rule:
    """An Iceberg catalog route's rule; KeyError for a route the table does not know."""
    return ICEBERG[(method, path)]
