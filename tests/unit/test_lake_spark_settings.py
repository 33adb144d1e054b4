"""The Spark settings that name an agent's Iceberg REST catalog (pipeline/lake.py): the catalog's class, type
and URI, the region Java's AWS SDK reads, and the reader's own credentials."""

from __future__ import annotations

import pytest

from pipeline.lake import lake_catalog_settings


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
