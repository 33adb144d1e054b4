"""One side of a differential run: a broker reached over raw Kafka protocol frames.

Requests are written as plain nested dicts and built into kafka-python's protocol classes (the ones the
clients use) at the version both brokers support, so a scenario reads like the request it sends. Answers
come back as plain dicts (``normalise.py`` takes out what is the broker's own, such as node ids).
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse

from tests.differential.normalise import Members, answer

CLOSED = "connection closed by the broker"


def build(cls: Any, data: dict[str, Any], version: int | None = None) -> Any:
    """``cls`` (a protocol message or one of its nested structs) from nested dicts of its field names."""
    fields = cls._struct.fields
    values: dict[str, Any] = {}
    for name, value in data.items():
        spec = fields[name]
        if spec.is_struct_array():
            values[name] = None if value is None else [build(spec.data_class, item) for item in value]
        elif spec.is_struct():
            values[name] = None if value is None else build(spec.data_class, value)
        else:
            values[name] = value
    return cls(version=version, **values) if version is not None else cls(**values)


class Connection:
    def __init__(self, port: int, timeout: float = 15.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self._buf = b""
        self._next_id = 0

    def close(self) -> None:
        self.sock.close()

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def recv_frame(self) -> bytes | None:
        """The next response frame (after its size), or None when the broker closed the connection."""
        try:
            while len(self._buf) < 4 or len(self._buf) < 4 + struct.unpack(">i", self._buf[:4])[0]:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    return None
                self._buf += chunk
        except (ConnectionResetError, TimeoutError):
            return None
        size = struct.unpack(">i", self._buf[:4])[0]
        data, self._buf = self._buf[4 : 4 + size], self._buf[4 + size :]
        return data

    def call(self, request: Any, response_class: Any) -> Any:
        """The decoded response to ``request``, or CLOSED."""
        self._next_id += 1
        request.with_header(correlation_id=self._next_id, client_id="strata-differential")
        self.send_frame(request.encode(header=True))
        data = self.recv_frame()
        if data is None:
            return CLOSED
        return response_class.decode(data, version=request.API_VERSION, header=True)


@dataclass
class Side:
    """A broker under test: its name, its port, the API versions it serves, one connection reused."""

    name: str
    port: int
    versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    common: dict[int, int] = field(default_factory=dict)  # api key -> version both sides serve
    common_min: dict[int, int] = field(default_factory=dict)  # api key -> lowest version both serve
    members: Members = field(default_factory=Members)
    last_raw: dict[str, Any] = field(default_factory=dict)  # the last answer before normalising
    _conn: Connection | None = None

    def connect(self) -> None:
        self._conn = Connection(self.port)
        got = self._conn.call(
            ApiVersionsRequest[3](client_software_name="strata-differential", client_software_version="1"),
            ApiVersionsResponse,
        )
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in got.api_keys}

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def conn(self) -> Connection:
        if self._conn is None:
            self._conn = Connection(self.port)
        return self._conn

    def call(self, api: Any, data: dict[str, Any], version: int | None = None) -> Any:
        """Send ``data`` as ``api``'s request at ``version`` (default: the highest both sides serve) and
        return the normalised answer; a closed connection is reconnected for the next call."""
        v = self.common[api.API_KEY] if version is None else version
        request = build(api[v], data, v)
        response_class = _response_class(api)
        got = self.conn.call(request, response_class)
        if isinstance(got, str):
            self.close()
            return CLOSED
        self.last_raw = got.to_dict(json=False)
        return answer(self.last_raw, self.members)

    def raw(self, payload: bytes) -> bytes | str:
        """Send one frame as given; the response frame's bytes, or CLOSED (then reconnect next time)."""
        conn = Connection(self.port)
        try:
            conn.send_frame(payload)
            got = conn.recv_frame()
        finally:
            conn.close()
        return CLOSED if got is None else got


def _response_class(api: Any) -> Any:
    import importlib

    module = importlib.import_module(api.__module__)
    return getattr(module, api.__name__.replace("Request", "Response"))
