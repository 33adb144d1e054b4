"""The schema registry's HTTP door: Confluent's REST API over ``registry``, a FastAPI app of its own (its own
error bodies and content negotiation), mounted at ``/schema-registry`` on the HTTP port and served at the
root of its own port (``--schema-registry-port``, Confluent's 8081 by default).

- ``app.py``: the app, and ``with_registry``, which puts it under the prefix on the HTTP port;
- ``door.py``: what every request passes first (paths, negotiation, authentication, bodies), with
  ``paths.py`` and ``negotiation.py``;
- ``access.py``: the permission checks; ``context.py``: what the routes may use;
- ``bodies.py`` and ``answers.py``: the JSON shapes in and out; ``errors.py``: errors as Confluent's bodies;
- the routes, one module per concept: ``about.py``, ``schemas.py``, ``subjects.py``, ``compatibility.py``,
  ``configs.py``. Their query parameters keep Confluent's names (``subjectPrefix``, ``defaultToGlobal``),
  camelCase, as clients send them.
"""
