"""Strata's Spark pipeline: topics as DataFrames with the Kafka source's schema, compaction as Spark tasks,
and the lake's Iceberg tables read through an agent's REST catalog.

    from pipeline import read_topic, latest_per_key

The public names are loaded on first use, so ``import pipeline`` (or one of its submodules) stays cheap:
``pipeline.reader`` needs nothing of pyspark until it runs, but its helpers import pyarrow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.lake.spark_catalog import with_lake_catalog
    from pipeline.reader import latest_per_key, read_latest, read_topic
    from pipeline.session import spark_session

# Public name -> the module that defines it.
_EXPORTS = {
    "read_topic": "pipeline.reader",
    "read_latest": "pipeline.reader",
    "latest_per_key": "pipeline.reader",
    "spark_session": "pipeline.session",
    "with_lake_catalog": "pipeline.lake.spark_catalog",
}

__all__ = ["latest_per_key", "read_latest", "read_topic", "spark_session", "with_lake_catalog"]  # = _EXPORTS


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value
