"""The schema registry's HTTP door: Confluent's REST API over ``registry``, a FastAPI app of its own (its own
error bodies and content negotiation), mounted at ``/schema-registry`` on the HTTP port and served at the
root of its own port (``--schema-registry-port``, Confluent's 8081 by default)."""
