"""The three schema formats behind one interface (``base``): Avro, JSON Schema and Protobuf."""
