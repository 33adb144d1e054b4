"""The schema registry's own port (``--schema-registry-port``, Confluent's 8081): a second uvicorn server on
the HTTP process's event loop, started and stopped by its lifespan (strata/http.py).

uvicorn's ``Server.serve`` would capture the process's signals, which belong to the main server, so the
parts are driven here: ``startup`` on a socket bound here (a port in use is a SettingsError naming the
setting, where uvicorn would ``sys.exit``), ``main_loop`` as a task, ``shutdown`` when the process stops.
TLS is the HTTP listener's (the same certificate and key). The app has no lifespan of its own: what it
uses is the process's, started before it.
"""

from __future__ import annotations

import asyncio
import logging
import socket

import uvicorn
from starlette.types import ASGIApp

from storage.errors import SettingsError
from strata.settings import Settings

log = logging.getLogger("strata.server")


class RegistryListener:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self._settings = settings
        self._config = uvicorn.Config(
            app,
            host=settings.host,
            port=settings.schema_registry_port,
            lifespan="off",
            ws="none",  # as strata/server.py's
            # The main server configured logging; configuring it again here would undo a test's capture.
            log_config=None,
            access_log=settings.access_log,
            ssl_certfile=settings.tls_cert_file,
            ssl_keyfile=settings.tls_key_file,
        )
        self._server: uvicorn.Server | None = None
        self._socket: socket.socket | None = None
        self._loop: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The port it listens on (the one the system chose for port 0)."""
        assert self._socket is not None, "the registry listener has not started"
        port: int = self._socket.getsockname()[1]
        return port

    @property
    def url(self) -> str:
        scheme = "https" if self._settings.tls_cert_file else "http"
        return f"{scheme}://{self._settings.host}:{self.port}"

    async def start(self) -> None:
        host, port = self._settings.host, self._settings.schema_registry_port
        try:
            self._socket = socket.create_server(
                (host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET, backlog=2048
            )
        except OSError as exc:
            raise SettingsError(
                f"the schema registry cannot listen on {host}:{port} (STRATA_SCHEMA_REGISTRY_PORT; -1 turns"
                f" it off): {exc.strerror}"
            ) from None
        self._config.load()
        server = uvicorn.Server(self._config)
        server.lifespan = self._config.lifespan_class(self._config)
        await server.startup(sockets=[self._socket])
        self._server = server
        self._loop = asyncio.create_task(server.main_loop(), name="schema-registry-listener")
        log.info("schema registry on %s (and under /schema-registry on the HTTP port)", self.url)

    async def close(self) -> None:
        """Stop accepting, let the requests in flight finish (uvicorn's graceful shutdown), close."""
        server, loop = self._server, self._loop
        if server is None or loop is None:
            if self._socket is not None:
                self._socket.close()
            return
        server.should_exit = True
        await loop
        await server.shutdown(sockets=[self._socket] if self._socket is not None else None)
        self._server = self._loop = None
