"""The agent core: what every stateless agent does, whichever front door a request came through.

It owns the produce path (``encode`` validates and partitions records, ``buffer`` admits and holds requests
against the memory budget, ``layout`` builds the flush file as requests arrive, ``flusher`` cuts a flush
every 250 ms or 8 MiB and uploads it with one PUT, ``sequencer`` commits flushes in cut order, ``offsets``
holds the answers), the fetch path (``fetch`` does the lookups and GETs through ``cache``; ``chunks``
selects, checks and decodes chunks, sans-IO; ``watch`` wakes long polls; ``browse`` pages through a
topic), and the coordinators any agent can play: consumer groups (``group_model``, ``group_state`` with the
protocol's rules as pure functions, ``group_doc`` its stored form, ``group_coordinator`` one metadata
transaction per request, ``consumer_protocol`` the members' bytes) and idempotent producers
(``inflight``). ``principals`` holds who may do what, for both doors. ``agent.py`` assembles them; start
reading there.

It imports ``storage`` only: it knows nothing of HTTP or of Kafka framing, and takes validated requests
with encoded batches and a memory reservation. The planner is a peer it never imports.
"""
