"""A SparkSession that reads Strata's bucket: s3a for s3:// buckets, the local filesystem for file://; and,
when asked, the lake's Iceberg tables through an agent's REST catalog (pipeline/lake/spark_catalog.py)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.jars import SparkSetupError, decoder_jar, jar_paths
from pipeline.lake.spark_catalog import CATALOG_NAME, iceberg_jars, lake_catalog_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def require_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise SparkSetupError("Spark needs Java 17 or newer: install a JDK or set JAVA_HOME")
    return java


def s3a_settings(endpoint: str | None, region: str | None = None) -> dict[str, str]:
    """Hadoop settings for s3a against S3, MinIO or moto, with the jars of ``pipeline.jars``.

    Why each odd value is here:
    - pyspark 4.x ships a Hadoop 3.4/3.5 client whose defaults write durations as strings ("60s", "24h",
      "5m"). The hadoop-aws 3.3.1 jar (the one we can get without Maven) reads several of them with
      getLong/getInt and fails on "60s", so every such duration is set here as a plain number (seconds
      or milliseconds, as 3.3.1 expects each one). Harmless on pyspark 3.5, whose defaults are numbers.
    - The credentials provider is pinned to SimpleAWSCredentialsProvider (key and secret from these
      settings): the default chain of the newer client names provider classes the 3.3.1 jar lacks.
    - Path-style access and plain HTTP for an endpoint override (MinIO, moto), as the agents do.
    """
    settings = {
        "fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.threads.keepalivetime": "60",
        "fs.s3a.connection.establish.timeout": "30000",
        "fs.s3a.connection.timeout": "200000",
        "fs.s3a.connection.ttl": "300000",
        "fs.s3a.connection.acquisition.timeout": "60000",
        "fs.s3a.connection.idle.time": "60000",
        "fs.s3a.connection.request.timeout": "0",
        "fs.s3a.multipart.purge.age": "86400",
        "fs.s3a.retry.interval": "500",
        "fs.s3a.retry.throttle.interval": "100",
        "fs.s3a.multipart.size": "67108864",
        "fs.s3a.multipart.threshold": "134217728",
        "fs.s3a.block.size": "33554432",
    }
    access_key = os.environ.get("AWS_ACCESS_KEY_ID")
    secret_key = os.environ.get("AWS_SECRET_ACCESS_KEY")
    if access_key and secret_key:
        settings["fs.s3a.access.key"] = access_key
        settings["fs.s3a.secret.key"] = secret_key
    if region or os.environ.get("AWS_DEFAULT_REGION"):
        settings["fs.s3a.endpoint.region"] = region or os.environ["AWS_DEFAULT_REGION"]
    if endpoint:
        settings["fs.s3a.endpoint"] = endpoint
        settings["fs.s3a.path.style.access"] = "true"
        settings["fs.s3a.connection.ssl.enabled"] = str(endpoint.startswith("https://")).lower()
    return settings


def spark_session(
    *,
    master: str | None = "local[2]",
    app_name: str = "strata",
    s3_endpoint: str | None = None,
    s3_region: str | None = None,
    jars_directory: Path | None = None,
    iceberg: bool = False,
    lake_catalog: str | None = None,
    lake_catalog_name: str = CATALOG_NAME,
    lake_catalog_token: str | None = None,
) -> SparkSession:
    """A (possibly existing) SparkSession able to read the bucket. Clear errors for missing Java or jars, or a
    missing JDK where the decoder jar must be built.

    ``master=None`` leaves the master to spark-submit or spark-defaults.conf. ``lake_catalog``, an agent's
    Iceberg catalog (``http://<agent>:<port>/iceberg``), makes the lake's tables readable by name as
    ``<lake_catalog_name>.<namespace>.<table>`` (``lake_catalog_token``: a principal's bearer token, where
    the agents authenticate); ``iceberg=True`` puts only Iceberg's runtime on the classpath, for
    ``pipeline.lake.with_lake_catalog`` to name a catalog later. An existing session keeps the jars it
    started with (Spark's rule): ask for Iceberg in the first session of the process.
    """
    require_java()
    # hadoop-aws for s3a, and the decoder read_topic runs in the JVM (built here if missing or stale).
    jars = [*jar_paths(jars_directory), decoder_jar(jars_directory)]
    if iceberg or lake_catalog:
        jars += iceberg_jars(jars_directory)
    # Executors' Python workers must run this interpreter (it has Strata and pyarrow installed); Spark
    # reads the environment when it launches them.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if master:  # None or "": keep what spark-submit (or spark-defaults) configured
        builder = builder.master(master)
    builder = (
        builder.appName(app_name)
        .config("spark.jars", ",".join(str(p) for p in jars))
        .config("spark.ui.enabled", "false")
        # Executors' Python workers run this interpreter, which has Strata installed.
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    for key, value in s3a_settings(s3_endpoint, s3_region).items():
        builder = builder.config(f"spark.hadoop.{key}", value)
    if lake_catalog:
        for key, value in lake_catalog_settings(
            lake_catalog, lake_catalog_name, s3_region, lake_catalog_token
        ).items():
            builder = builder.config(key, value)
    return builder.getOrCreate()
