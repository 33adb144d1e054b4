"""One module per Kafka API family. A handler takes a decoded request and returns the response to send
(``None`` for none); it never touches the socket (broker/connection.py does)."""
