"""The lake catalog's locations and URLs, from Strata's settings (storage/lake_catalog.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.errors import SettingsError
from storage.lake_catalog import sqlalchemy_url, warehouse_location


def test_the_warehouse_is_the_lake_prefix_of_the_bucket(tmp_path: Path) -> None:
    assert warehouse_location(tmp_path.as_uri()) == (tmp_path / "lake").as_uri()
    assert warehouse_location("s3://logs") == "s3://logs/lake"
    assert warehouse_location("s3://logs/team/a") == "s3://logs/team/a/lake"


def test_postgres_urls_name_psycopg_3_and_sqlite_urls_stay() -> None:
    assert sqlalchemy_url("sqlite:////var/strata/metadata.db") == "sqlite:////var/strata/metadata.db"
    assert (
        sqlalchemy_url("postgresql://u@db:5432/strata?options=-csearch_path%3Ds1")
        == "postgresql+psycopg://u@db:5432/strata?options=-csearch_path%3Ds1"
    )
    assert sqlalchemy_url("postgres://db/strata") == "postgresql+psycopg://db/strata"
    with pytest.raises(SettingsError):
        sqlalchemy_url("mysql://db/strata")
