"""A bare Kafka protocol client for tests that need exact control of frames (pipelining, garbage, acks=0).

Requests are built with kafka-python's protocol classes, the same ones real clients use.
"""

from __future__ import annotations

import socket
import struct
from typing import Any


class Wire:
    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self._buf = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def frame(request: Any, correlation_id: int) -> bytes:
        request.with_header(correlation_id=correlation_id, client_id="strata-test")
        data: bytes = request.encode(header=True, framed=True)
        return data

    def send(self, *frames: bytes) -> None:
        self.sock.sendall(b"".join(frames))

    def recv_frame(self) -> bytes:
        """One response frame's bytes after the size. Raises ConnectionError if the server closed."""
        while len(self._buf) < 4 or len(self._buf) < 4 + struct.unpack(">i", self._buf[:4])[0]:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self._buf += chunk
        size = struct.unpack(">i", self._buf[:4])[0]
        data, self._buf = self._buf[4 : 4 + size], self._buf[4 + size :]
        return data

    def call(self, request: Any, response_class: Any, correlation_id: int = 1) -> Any:
        self.send(self.frame(request, correlation_id))
        return self.decode(self.recv_frame(), response_class, request.API_VERSION, correlation_id)

    @staticmethod
    def decode(data: bytes, response_class: Any, version: int, correlation_id: int) -> Any:
        response = response_class.decode(data, version=version, header=True)
        assert response._header.correlation_id == correlation_id
        return response

    def closed_by_server(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
