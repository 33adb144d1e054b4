"""The Spark settings that name an agent's Iceberg REST catalog (pipeline/lake/spark_catalog.py): the
catalog's class, type and URI, the region Java's AWS SDK reads, and the reader's own credentials; the Iceberg
jars, refused for a Spark they are not built for."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.jars import ICEBERG_RUNTIME
from pipeline.lake.spark_catalog import iceberg_jars, lake_catalog_settings
from storage.errors import SparkSetupError


def test_the_catalog_settings_name_the_agent_the_region_and_the_readers_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_REGION", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    assert lake_catalog_settings("http://agent:8080/iceberg/", "l") == {
        "spark.sql.catalog.l": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.l.type": "rest",
        "spark.sql.catalog.l.uri": "http://agent:8080/iceberg",
        "spark.sql.catalog.l.client.region": "eu-west-3",
        "spark.sql.catalog.l.s3.access-key-id": "key",
        "spark.sql.catalog.l.s3.secret-access-key": "secret",
    }
    assert lake_catalog_settings("http://a/iceberg", region="us-east-2")[
        "spark.sql.catalog.lake.client.region"
    ] == ("us-east-2")


def test_the_iceberg_jars_refuse_a_spark_they_are_not_built_for(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import pyspark

    monkeypatch.setattr(pyspark, "__version__", "4.3.0")
    with pytest.raises(SparkSetupError, match=r"built for Spark 4\.1, and pyspark 4\.3\.0 is installed"):
        iceberg_jars(tmp_path)


def test_missing_iceberg_jars_name_the_fetch_and_the_maven_coordinates(tmp_path: Path) -> None:
    with pytest.raises(SparkSetupError) as missing:
        iceberg_jars(tmp_path)
    assert ICEBERG_RUNTIME in missing.value.message
    assert f"python -m pipeline.jars {tmp_path}" in missing.value.message
    assert "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0" in missing.value.message
