"""A Confluent-compatible schema registry, served by every agent from the metadata store (no leader, no
``_schemas`` topic).

- ``errors``: the registry's own error model. Its codes (40401 subject not found, 42201 invalid schema, ...)
  are Confluent's, and collide with Strata's own numbers for other meanings, so they never mix.
- ``formats``: each schema type (Avro, JSON Schema, Protobuf) parsed, normalized, fingerprinted and checked
  for compatibility, sans IO.
- validation on produce: ``verdicts`` (what the doors hold, light), ``validate`` (the rules),
  ``schema_cache`` (the registry's facts, cached) and ``framing`` (Confluent's schema-id framing of a record).

The layer sits beside ``agents`` and ``planner``: it imports ``storage`` only.
"""
