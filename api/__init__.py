"""The HTTP front door (FastAPI): produce, fetch, topics, groups, the cluster view and the web console.

``app.py`` assembles the app from an ``HttpContext`` (``context.py``), the narrow view of the process its
routes may use; ``routes/`` has one router per resource; ``middleware.py`` bounds bodies, authenticates and
admits produce bodies against the agent's buffer; ``errors.py`` is the one map from Strata's error types to
HTTP statuses and codes; ``models.py`` and the ``*_models.py`` modules are the JSON shapes;
``produce_body.py`` and ``record_json.py`` parse and render records on the hot paths (with C fast paths in
``_recordjson.c``). ``ui/`` holds the console's static files, served by the agent itself.

It imports the agent core (``agents``) and ``storage``, and reads the planner's job statistics; it never
imports the Kafka door, its peer, nor the process (``strata``) that builds it.
"""
