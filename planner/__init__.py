"""Background work on the log: compaction, retention and garbage collection, planned and run as leased jobs.

``round.py`` sequences one round: retention (``retention.py``), planning (``planner.py`` picks files by
level, age and dirty ratio, and writes ``jobs.py``'s specs as leased job rows), running the jobs this
process can lease (``runner.py``; one attempt is ``job_run.py``: two forward-only GET streams per input
file, ``streams.py``, Kafka's two-pass dedup with the bounded ``offset_map.py`` and the pure keep rule
``retain.py``, output files built by ``outputs.py``), then GC of obsolete files and orphan uploads
(``gc.py``). ``stats.py`` is a job's report, ``samples.py`` the dirty-ratio history, ``throttle.py`` the read
rate limit.

It imports ``storage`` only; the agent core is a peer it never imports, and ``pipeline`` runs its jobs as
Spark tasks from above.
"""
