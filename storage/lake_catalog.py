"""The lake's Iceberg catalog: pyiceberg's ``SqlCatalog`` on Strata's own metadata database.

Why pyiceberg's SQL catalog: its tables (``iceberg_tables``, ``iceberg_namespace_properties``) are the
layout of Java's ``JdbcCatalog`` too, so any engine with a JDBC catalog reads the same tables, and a table's
current metadata pointer is swapped by one compare-and-set UPDATE in the same database that holds the
topic's offsets. There is no second service to run. The writer (``pipeline/lake``) commits through it and
the agents' read-only REST catalog (``api/iceberg``) loads tables through it, so both open it here, from
the process's settings.

The warehouse is the ``lake/`` prefix of Strata's bucket (``file://<dir>/lake`` or
``s3://<bucket>/<prefix>/lake``). Strata's own GC lists only its data prefix, so it never touches Iceberg's
files; the lake's maintenance removes those. On S3 pyiceberg's FileIO (pyarrow) finds credentials through
the standard AWS chain, as boto3 does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from storage.errors import SettingsError
from storage.objectstore import parse_store_url

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog

CATALOG_NAME = "strata"
LAKE_PREFIX = "lake"


def warehouse_location(bucket_url: str) -> str:
    """Where the lake's tables live: the ``lake/`` prefix of the bucket ``bucket_url`` names."""
    location = parse_store_url(bucket_url)
    if location.path is not None:
        return (location.path.resolve() / LAKE_PREFIX).as_uri()
    prefix = f"{location.prefix}/{LAKE_PREFIX}" if location.prefix else LAKE_PREFIX
    return f"s3://{location.bucket}/{prefix}"


def sqlalchemy_url(metadata_url: str) -> str:
    """The SQLAlchemy URL of Strata's metadata database: SQLite's is one already; PostgreSQL's names the
    psycopg (3) driver, which Strata already depends on, instead of SQLAlchemy's default psycopg2."""
    scheme, sep, rest = metadata_url.partition("://")
    scheme = scheme.lower()
    if scheme == "sqlite" and sep:
        return metadata_url
    if scheme in ("postgresql", "postgres") and sep:
        return f"postgresql+psycopg://{rest}"
    raise SettingsError(
        f"the lake's catalog needs a sqlite:/// or postgresql:// metadata URL, got {scheme!r}"
    )


def catalog_properties(
    metadata_url: str, bucket_url: str, *, s3_endpoint: str | None = None, s3_region: str | None = None
) -> dict[str, str]:
    props = {
        "uri": sqlalchemy_url(metadata_url),
        "warehouse": warehouse_location(bucket_url),
    }
    if s3_endpoint:
        props["s3.endpoint"] = s3_endpoint
        # As Strata's own S3 store does with an endpoint (MinIO, moto): buckets under the path. pyiceberg's
        # FileIO hands its properties to each table, so readers given them (iceberg-rust) do the same.
        props["s3.path-style-access"] = "true"
    if s3_region:
        props["s3.region"] = s3_region
    return props


def open_catalog(
    metadata_url: str, bucket_url: str, *, s3_endpoint: str | None = None, s3_region: str | None = None
) -> SqlCatalog:
    """The catalog of the metadata database ``metadata_url`` with its warehouse in ``bucket_url``'s bucket.

    pyiceberg is imported here, not at module load, so processes that never touch the lake do not pay for it.
    """
    from pyiceberg.catalog.sql import SqlCatalog

    props = catalog_properties(metadata_url, bucket_url, s3_endpoint=s3_endpoint, s3_region=s3_region)
    return SqlCatalog(CATALOG_NAME, **props)
