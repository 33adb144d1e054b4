"""Spark as a reader of the lake's Iceberg tables, by name, through an agent's Iceberg REST catalog.

The lake's tables live in pyiceberg's SQL catalog on Strata's metadata database (storage/lake_catalog.py),
and every agent serves them read-only at ``http://<agent>/iceberg`` (api/iceberg/). Spark reads them with
Apache Iceberg's own Spark runtime (``org.apache.iceberg.spark.SparkCatalog``, ``type=rest``), the reference
reader of the format, so what Spark sees is what any Iceberg engine sees: a catalog named ``lake`` here
makes ``spark.table("lake.strata.orders")``, ``SHOW TABLES IN lake.strata``, the metadata tables
(``lake.strata.orders.snapshots``) and time travel (``VERSION AS OF``) work as they do on any Iceberg catalog.

Files are read through the catalog's default FileIO, Iceberg's ``ResolvingFileIO``: the local filesystem
(Hadoop's) for a file:// bucket, ``S3FileIO`` (AWS SDK v2, from ``iceberg-aws-bundle``) for s3://. The
catalog's config gives ``S3FileIO`` the endpoint and path-style addressing, so nothing here repeats them;
it gives the region as ``s3.region``, the name pyiceberg reads, while Java's SDK reads ``client.region``
(and, from the environment, ``AWS_REGION`` but not ``AWS_DEFAULT_REGION``), so the region is set here.
The catalog vends no credentials: the reader brings its own, ``AWS_ACCESS_KEY_ID`` and
``AWS_SECRET_ACCESS_KEY`` here, set as the catalog's properties (not left to the SDK's environment chain)
so that executors on other hosts, which get the FileIO with those properties, read with them too. Where the
agents authenticate, the catalog's ``token`` is a principal's bearer token (``tokens`` in the principals
file), which Iceberg's REST client sends as ``Authorization: Bearer``; the principal needs ``READ`` on each
table (resource type ``TABLE``).

Invariants: the Iceberg runtime is built for one Spark minor version (``pipeline.jars.ICEBERG_SPARK``); a
session of another pyspark is refused with a SparkSetupError before Spark starts, rather than failing
later with a JVM linkage error. Reading only: the catalog refuses every write (its config lists no write
endpoint, and Iceberg's client checks that list before it commits; Spark has written its data files by then,
which stay in the bucket unreferenced, so readers are best given read-only credentials).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.jars import ICEBERG_JARS, ICEBERG_SPARK, SparkSetupError, jar_paths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CATALOG_NAME = "lake"


def iceberg_jars(directory: Path | None = None) -> list[Path]:
    """The Iceberg runtime and its AWS bundle; SparkSetupError if they are missing, or if the installed
    pyspark is not the Spark they are built for."""
    import pyspark

    if not pyspark.__version__.startswith(f"{ICEBERG_SPARK}."):
        raise SparkSetupError(
            f"Apache Iceberg's Spark runtime here ({ICEBERG_JARS[0]}) is built for Spark {ICEBERG_SPARK}, "
            f"and pyspark {pyspark.__version__} is installed: install pyspark {ICEBERG_SPARK}.x (as "
            "pyproject.toml pins it) to read the lake's tables from Spark"
        )
    return jar_paths(directory, ICEBERG_JARS)


def lake_catalog_settings(
    uri: str, name: str = CATALOG_NAME, region: str | None = None, token: str | None = None
) -> dict[str, str]:
    """Spark settings naming the catalog ``name`` for the agent's Iceberg REST catalog at ``uri``
    (``http://<agent>:<port>/iceberg``), with a principal's bearer ``token`` where the agents authenticate;
    session settings, which a running session may be given too."""
    prefix = f"spark.sql.catalog.{name}"
    settings = {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "rest",
        f"{prefix}.uri": uri.rstrip("/"),
    }
    if token:
        settings[f"{prefix}.token"] = token
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        settings[f"{prefix}.client.region"] = region
    access_key = os.environ.get("AWS_ACCESS_KEY_ID")
    secret_key = os.environ.get("AWS_SECRET_ACCESS_KEY")
    if access_key and secret_key:
        settings[f"{prefix}.s3.access-key-id"] = access_key
        settings[f"{prefix}.s3.secret-access-key"] = secret_key
        if token := os.environ.get("AWS_SESSION_TOKEN"):
            settings[f"{prefix}.s3.session-token"] = token
    return settings


def with_lake_catalog(
    spark: SparkSession,
    uri: str,
    *,
    name: str = CATALOG_NAME,
    region: str | None = None,
    token: str | None = None,
) -> SparkSession:
    """A new session on ``spark``'s SparkContext in which the catalog ``name`` is the agent's at ``uri``.

    A new session, not ``spark`` changed: Spark keeps a catalog it has loaded for the session's life, so the
    same name cannot later point elsewhere in one session, while a new session has its own catalogs and SQL
    settings and shares the context (executors, jars, Hadoop settings). ``spark`` must have the Iceberg
    runtime on its classpath (``spark_session(iceberg=True)``, or ``spark.jars`` / ``--jars`` naming
    ``python -m pipeline.jars``'s Iceberg jars)."""
    session = spark.newSession()
    for key, value in lake_catalog_settings(uri, name, region, token).items():
        session.conf.set(key, value)
    return session
