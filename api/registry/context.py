"""What the registry's routes may use: the narrow context the process hands to ``create_registry_app``.

The registry's door is a peer of the HTTP door's routes, with a context of its own: the registry's service
(``registry.service``: the schemas, subjects, configs and modes in the metadata store), the principals and
ACLs both doors check, the bounds on a request body, and the facts ``/v1/metadata/*`` shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.security import Security
from registry.service import SchemaRegistry

# Confluent's default schema.registry.group.id, which its /v1/metadata/id names as the registry's cluster.
REGISTRY_CLUSTER = "schema-registry"


@dataclass(frozen=True, slots=True)
class RegistryContext:
    registry: SchemaRegistry
    # Who may use the registry and what they may do; None: no authentication, every request allowed.
    security: Security | None
    # A request body larger than this is refused before it is read whole (413).
    max_body_bytes: int
    # ...and one that takes longer than this to arrive (408).
    body_timeout_s: float
    # The cluster id the Kafka door shows (/v1/metadata/id), and Strata's version (/v1/metadata/version).
    cluster_id: str
    version: str
