"""The lake's read-only Iceberg REST catalog: the REST spec's read endpoints over the tables of the lake's
SQL catalog (storage/lake_catalog.py), a FastAPI app of its own (the spec's error bodies, its own door in
front), served under ``/iceberg`` on every agent's HTTP port, so that DuckDB's ``ATTACH ... (TYPE
iceberg)`` and pyiceberg's ``RestCatalog`` reach the tables by name.

- ``app.py``: the app, and ``with_iceberg``, which puts it under the prefix on the HTTP port;
- ``door.py``: authentication with the agent's principals, before any route;
- ``access.py``: the permission checks (the ``ICEBERG`` entries of agents/permissions.py);
- ``lake.py``: the catalog's blocking reads, with its failures as this API's errors;
- ``errors.py``: the one place where errors become the spec's ``{"error": {...}}`` bodies;
- the routes: ``catalog.py`` (config and namespaces), ``tables.py`` (list, load, exists) and
  ``writes.py`` (every write the spec defines, refused).
"""
