"""What the Iceberg catalog's routes may use: the narrow context the process hands to
``create_iceberg_app``.

A peer of the schema registry's door, with a context of its own: the lake's catalog (api/iceberg/lake.py)
and the principals and ACLs every door checks.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.security import Security
from api.iceberg.lake import LakeCatalog


@dataclass(frozen=True, slots=True)
class IcebergContext:
    lake: LakeCatalog
    # Who may use the catalog and what they may do; None: no authentication, every request allowed.
    security: Security | None
