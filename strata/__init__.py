"""The Strata process: what runs when you type ``strata``.

It owns the composition root (``runtime.py``: stores, metadata, agent, the Kafka listener, the compaction
round, built from ``settings.py``), start-up and shutdown (``server.py``, ``http.py``), the background loop
of the worker role (``loop.py``), the command line (``cli.py``, with the HTTP client commands in
``client_commands.py``) and the demo (``demo.py``).

This is the top layer: it may import every other package (the two front doors ``api`` and ``broker``,
``pipeline``, ``agents``, ``planner``, ``storage``), and none of them imports it. The import contracts in
pyproject.toml check both directions.
"""
