"""Exactly-once (transactions) checks in the style of Jepsen's ``jepsen.tests.kafka`` and Kafka's own
TransactionsTest, with real clients over TCP.

* ``history``: the history model (operations as JSON lines, one file per client process) and its loader.
* ``checker`` (with ``cycles``): the anomaly checks over a history; ``copycheck``: the copier's check.
* ``worker`` and ``workload``: the client processes and the run that drives them, then drains the topic.
* ``copier``: Kafka's TransactionsTest in Python (copier processes killed with SIGKILL and restarted).
* ``python -m tests.eos``: the workload and checker against a running cluster, for longer runs.
"""
