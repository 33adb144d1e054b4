"""The catalog's reads: namespaces, tables and a table's current metadata, from the lake's SQL catalog
(pyiceberg's ``SqlCatalog`` on Strata's metadata database, storage/lake_catalog.py), with every way they
fail as one of this API's errors (api/iceberg/errors.py).

Why pyiceberg, read-only, rather than SQL on ``iceberg_tables``: the writer commits through the same
``SqlCatalog``, so this reads exactly the layout it writes, and pyiceberg parses and validates a table's
metadata file (any format version, gzip or not) before it is served: a broken file is refused here rather
than handed to every reader. The answer's ``metadata`` is that parsed model, serialized again.

Every call blocks (SQL, object-store reads): the routes run them on a worker thread. The catalog is
opened on first use, not at start-up, so an agent whose lake is never read never imports pyiceberg nor
SQLAlchemy (both imported in the functions that use them), nor opens a second connection pool on its
metadata database; one opened catalog (its SQLAlchemy engine, a pool shared by threads) serves every
request after that, until the process closes it.

Failures and their kinds:
- a namespace or table the catalog does not hold: ``NoSuchNamespace`` / ``NoSuchTable``;
- the metadata database does not answer (SQLAlchemy's DBAPIError wraps every driver error):
  ``CatalogUnavailable``;
- the current metadata file is missing, or not table metadata (pyiceberg raises its own ValidationError
  for what pydantic refuses, JSON's decode error is a ValueError, a bad gzip stream is
  ``gzip.BadGzipFile``): ``UnreadableMetadata``;
- any other OSError reading it (pyarrow's S3 and local filesystems raise OSError; pyiceberg turns a
  missing key into FileNotFoundError and a refused one into PermissionError): ``StoreUnavailable``.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from api.iceberg.errors import (
    CatalogUnavailable,
    NoSuchNamespace,
    NoSuchTable,
    StoreUnavailable,
    UnreadableMetadata,
)
from storage.lake_catalog import CATALOG_NAME, open_catalog, warehouse_location

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog

Namespace = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LoadedTable:
    metadata_location: str
    # The table metadata as JSON text (the spec's TableMetadata), ready to embed in the answer.
    metadata_json: str


class LakeCatalog:
    """The lake's catalog, read-only, for the process whose settings name ``metadata_url`` and
    ``bucket_url``; ``s3_endpoint`` and ``s3_region`` as the process reaches its bucket."""

    def __init__(
        self,
        metadata_url: str,
        bucket_url: str,
        *,
        s3_endpoint: str | None = None,
        s3_region: str | None = None,
    ) -> None:
        self.metadata_url = metadata_url
        self.bucket_url = bucket_url
        self.s3_endpoint = s3_endpoint
        self.warehouse = warehouse_location(bucket_url)
        self.s3_region = s3_region or (_default_region() if self.warehouse.startswith("s3://") else None)
        self._lock = threading.Lock()
        self._catalog: SqlCatalog | None = None

    @property
    def name(self) -> str:
        return CATALOG_NAME

    def reader_config(self) -> dict[str, str]:
        """What a reader needs to reach the tables' files, as Iceberg's FileIO properties: for an S3 bucket
        behind an endpoint (MinIO, moto), the endpoint, with path-style addressing as Strata's own client
        uses there (storage/objectstore/s3.py), and the region, under pyiceberg's name (``s3.region``) and
        Java's (``client.region``: Iceberg's Java S3FileIO reads only that one). Never credentials: readers
        bring their own."""
        if not self.warehouse.startswith("s3://"):
            return {}
        config: dict[str, str] = {}
        if self.s3_endpoint:
            config["s3.endpoint"] = self.s3_endpoint
            config["s3.path-style-access"] = "true"
        if self.s3_region:
            config["s3.region"] = self.s3_region
            config["client.region"] = self.s3_region
        return config

    def namespaces(self, parent: Namespace) -> list[Namespace]:
        """The namespaces directly under ``parent`` (the top level for ``()``)."""
        with _translated():
            catalog = self._open()
            if parent:
                catalog.load_namespace_properties(parent)  # NoSuchNamespace, as the spec asks
            return [tuple(ns) for ns in catalog.list_namespaces(parent)]

    def namespace_properties(self, namespace: Namespace) -> dict[str, str]:
        with _translated():
            return dict(self._open().load_namespace_properties(namespace))

    def tables(self, namespace: Namespace) -> list[tuple[str, ...]]:
        """The identifiers (namespace parts, then the name) of the tables in ``namespace``."""
        with _translated():
            return [tuple(t) for t in self._open().list_tables(namespace)]

    def load(self, identifier: tuple[str, ...]) -> LoadedTable:
        with _translated():
            table = self._open().load_table(identifier)
            return LoadedTable(table.metadata_location, table.metadata.model_dump_json())

    def close(self) -> None:
        """Close the catalog's pooled database connections (the process's end); a later call reopens."""
        with self._lock:
            if self._catalog is not None:
                self._catalog.engine.dispose()
                self._catalog = None

    def _open(self) -> SqlCatalog:
        with self._lock:
            if self._catalog is None:
                self._catalog = open_catalog(
                    self.metadata_url,
                    self.bucket_url,
                    s3_endpoint=self.s3_endpoint,
                    s3_region=self.s3_region,
                )
            return self._catalog


def _default_region() -> str | None:
    """The region Strata's own S3 client uses when none is set: the AWS chain's (``AWS_REGION``,
    ``AWS_DEFAULT_REGION``, the config file), which botocore reads without a request. pyiceberg's FileIO
    is given it because, without one, it asks AWS where the bucket is: a request to AWS itself, wrong for
    an endpoint such as MinIO's, and a stall of seconds where AWS cannot be reached."""
    import botocore.session

    region: str | None = botocore.session.get_session().get_config_variable("region")
    return region


@contextmanager
def _translated() -> Iterator[None]:
    """pyiceberg's, SQLAlchemy's and the filesystems' errors as this API's (module docstring)."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError, ValidationError
    from sqlalchemy.exc import DBAPIError

    try:
        yield
    except NoSuchNamespaceError as exc:
        raise NoSuchNamespace(str(exc)) from None
    except NoSuchTableError as exc:
        raise NoSuchTable(str(exc)) from None
    except DBAPIError as exc:
        raise CatalogUnavailable(f"the lake's catalog database does not answer: {exc.orig}") from None
    except (FileNotFoundError, gzip.BadGzipFile, ValidationError, ValueError) as exc:
        raise UnreadableMetadata(f"the table's current metadata file cannot be read: {exc}") from None
    except OSError as exc:
        raise StoreUnavailable(f"the object store does not answer: {exc}") from None
