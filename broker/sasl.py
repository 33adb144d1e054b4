"""One connection's SASL authentication (Kafka's SaslHandshake v1 then SaslAuthenticate): the exchange,
sans-IO (``SaslExchange``), and the gate that applies it to a connection (``SaslGate``).

Mechanisms:
- ``PLAIN`` (RFC 4616): one SaslAuthenticate carrying ``authzid NUL authcid NUL password``; an authzid other
  than empty or the authcid is refused, as Kafka's PlainSaslServer does.
- ``SCRAM-SHA-256`` and ``SCRAM-SHA-512`` (RFC 5802 / 7677): client-first, server-first, client-final,
  server-final over two SaslAuthenticate round trips. The message syntax, nonces and proofs are scramp's
  (the SCRAM library pg8000 uses): a well-kept implementation of a protocol where a hand-written parser is
  an easy place for a mistake. An unknown user gets made-up credentials with a salt stable per name and
  no hashing per attempt (``Security.scram_credential``), so the exchange fails at the proof like a
  wrong password does and neither its salt nor its timing tells which names exist.

The states: ``NEW`` (only ApiVersions and SaslHandshake are served) -> ``HANDSHAKEN`` (mechanism chosen)
-> ``AUTHENTICATED``; any failure -> ``FAILED``, after which the connection sends the error answer and
closes.

SaslHandshake v0 (Kafka before 1.0) is followed by raw tokens: each frame after it is the bare SASL token,
answered with a bare size-prefixed token (``raw``), until the exchange completes. Current clients send v1,
but librdkafka reads "SASL handshake supported" from ApiVersions advertising v0, so v0 is offered and
served.

The gate: with authentication configured (``ctx.security``), a connection serves nothing but ApiVersions,
SaslHandshake and SaslAuthenticate until SASL succeeds; any other request closes it, as Kafka's broker
does, and frames over ``SASL_MAX_FRAME`` are refused before that (Kafka's ``sasl.server.max.receive.size``).
Frames read before authentication are reserved from a small budget of their own
(``BrokerContext.unauthenticated``, over all connections; a connection that finds it full is closed), never
from the produce buffer, and a connection not authenticated within ``AUTHENTICATION_TIMEOUT_S`` is closed:
clients that never log in cannot hold memory or connection slots that producers need. Once authenticated,
the connection's context carries its principal for every handler. A failed exchange is answered with its
error, then the connection closes; a failed bare token (v0 has no error field) closes it at once. SASL
answers take their place in the connection's answer order (broker/answers.py) like any other.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from dataclasses import replace
from enum import Enum, auto
from typing import Protocol

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse
from scramp import ScramException, ScramMechanism

from agents.principals import Principal
from agents.security import Security
from broker import apis, errors, frames
from broker.answers import Answers
from broker.codec import Decoded
from broker.context import BrokerContext
from storage.errors import IllegalSaslState, SaslAuthenticationFailed, StrataError, UnsupportedSaslMechanism

log = logging.getLogger("strata.kafka")

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class State(Enum):
    NEW = auto()
    HANDSHAKEN = auto()
    AUTHENTICATED = auto()
    FAILED = auto()


# What the client is told on any failed authentication: the same for an unknown user and a wrong password.
_FAILED = "Authentication failed: invalid username or password"


class SaslExchange:
    def __init__(self, security: Security, mechanisms: tuple[str, ...] = MECHANISMS) -> None:
        self._security = security
        self.mechanisms = mechanisms
        self.state = State.NEW
        self.mechanism: str | None = None
        self.principal: Principal | None = None
        self._scram: object | None = None  # scramp's ScramServer while a SCRAM exchange runs
        self._scram_user: str | None = None
        self._client_nonce = ""
        self.raw = False  # after a v0 handshake: tokens come as bare frames

    @property
    def expects_raw_token(self) -> bool:
        return self.raw and self.state is State.HANDSHAKEN

    def handshake(self, mechanism: str, version: int = 1) -> None:
        """SaslHandshake: UnsupportedSaslMechanism or IllegalSaslState (both end the connection)."""
        if self.state is not State.NEW:
            self.state = State.FAILED
            raise IllegalSaslState("SaslHandshake is expected only once, before authentication")
        if mechanism not in self.mechanisms:
            self.state = State.FAILED
            raise UnsupportedSaslMechanism(f"unsupported SASL mechanism {mechanism!r}")
        self.mechanism = mechanism
        self.raw = version == 0
        self.state = State.HANDSHAKEN

    def authenticate(self, token: bytes) -> bytes:
        """One SaslAuthenticate: the bytes to answer with. ``state`` is AUTHENTICATED once the exchange is
        complete; SaslAuthenticationFailed or IllegalSaslState end the connection."""
        if self.state is not State.HANDSHAKEN:
            self.state = State.FAILED
            raise IllegalSaslState("SaslAuthenticate before a SaslHandshake, or after authentication")
        try:
            if self.mechanism == "PLAIN":
                return self._plain(token)
            return self._scram_step(token)
        except SaslAuthenticationFailed:
            self.state = State.FAILED
            raise

    def _plain(self, token: bytes) -> bytes:
        try:
            authzid, name, password = token.decode("utf-8").split("\x00")
        except ValueError:  # not UTF-8 (UnicodeDecodeError) or not three fields
            raise SaslAuthenticationFailed("malformed SASL/PLAIN message") from None
        if authzid and authzid != name:
            raise SaslAuthenticationFailed("SASL/PLAIN authorization id must be empty or the user name")
        principal = self._security.by_password(name, password)
        if principal is None:
            raise SaslAuthenticationFailed(_FAILED)
        self._done(principal)
        return b""

    def _scram_step(self, token: bytes) -> bytes:
        assert self.mechanism is not None
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("malformed SCRAM message") from None
        try:
            if self._scram is None:
                server = ScramMechanism(self.mechanism).make_server(self._scram_credentials)
                server.set_client_first(message)
                self._client_nonce = _attribute(message, "r")
                self._scram = server
                return str(server.get_server_first()).encode()
            server = self._scram
            _accept_librdkafka_nonce(server, self._client_nonce, message)
            server.set_client_final(message)  # type: ignore[attr-defined]
            final = str(server.get_server_final()).encode()  # type: ignore[attr-defined]
        except ScramException:
            raise SaslAuthenticationFailed(_FAILED) from None
        principal = self._security.principal_named(self._scram_user or "")
        if principal is None:  # unreachable: a made-up credential cannot produce a valid proof
            raise SaslAuthenticationFailed(_FAILED)
        self._done(principal)
        return final

    def _scram_credentials(self, name: str) -> tuple[bytes, bytes, bytes, int]:
        """scramp's auth_fn: the user's salted credentials, or made-up ones for an unknown user."""
        assert self.mechanism is not None
        self._scram_user = name
        credential = self._security.scram_credential(self.mechanism, name)
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def _done(self, principal: Principal) -> None:
        self.principal = principal
        self.state = State.AUTHENTICATED


def _attribute(message: str, key: str) -> str:
    """A SCRAM message's attribute value ("" if absent); values never contain ','."""
    for part in message.split(","):
        if part.startswith(key + "="):
            return part[2:]
    return ""


def _accept_librdkafka_nonce(server: object, client_nonce: str, client_final: str) -> None:
    """librdkafka before 2.6.1 (Debian's kcat is 2.0.2) sends the client nonce twice in client-final,
    ``r=<client nonce><client nonce><server part>``, and computes its proof over that message (its
    PR #4895). Kafka 3.8.1 to 3.9 accept it, comparing with endsWith. Accept exactly that form: it still
    carries this exchange's fresh server nonce, so a replayed message fails as before. scramp compares
    against, and rebuilds the signed message from, its ``nonce``, so that is what is set for the check.
    """
    expected = str(server.nonce)  # type: ignore[attr-defined]
    sent = _attribute(client_final, "r")
    if client_nonce and sent != expected and sent == client_nonce + expected:
        server.nonce = type(server.nonce)(sent)  # type: ignore[attr-defined]


# The largest frame read before SASL authentication (Kafka's sasl.server.max.receive.size default).
SASL_MAX_FRAME = 512 * 1024
# A connection that has not authenticated by then is closed (it would hold a connection slot for nothing).
AUTHENTICATION_TIMEOUT_S = 10.0

# What a connection may ask before it has authenticated.
BEFORE_AUTHENTICATION = frozenset({apis.API_VERSIONS, apis.SASL_HANDSHAKE, apis.SASL_AUTHENTICATE})

_SIZE = struct.Struct(">i")


class Gated(Protocol):
    """The connection a gate guards (broker/connection.py)."""

    peer: object
    ctx: BrokerContext

    def close(self) -> None:
        """Close at once."""

    def finish(self) -> None:
        """Answer what is owed, read nothing more, then close."""


class SaslGate:
    """A connection's SASL requests, answered in order, and its deadline to authenticate."""

    def __init__(self, security: Security | None, answers: Answers, connection: Gated) -> None:
        # None when the listener needs no authentication.
        self.exchange = SaslExchange(security) if security is not None else None
        self._answers = answers
        self._connection = connection
        self._timer: asyncio.TimerHandle | None = None

    @property
    def authenticated(self) -> bool:
        return self.exchange is None or self.exchange.state is State.AUTHENTICATED

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """The connection is open: with SASL, it has ``AUTHENTICATION_TIMEOUT_S`` to authenticate."""
        if self.exchange is not None:
            self._timer = loop.call_later(AUTHENTICATION_TIMEOUT_S, self._late)

    def stop(self) -> None:
        """The connection is lost."""
        if self._timer is not None:
            self._timer.cancel()

    def check_size(self, size: int) -> int:
        """A frame's declared size, read before authentication: BadRequest if over ``SASL_MAX_FRAME``."""
        if self.exchange is not None and self.exchange.expects_raw_token:
            # A bare SASL token (after a v0 handshake) has no request header: only the upper limit holds.
            return frames.check_size(size, SASL_MAX_FRAME, minimum=0)
        return frames.check_size(size, SASL_MAX_FRAME)

    def _late(self) -> None:
        self._timer = None
        if not self.authenticated and not self._answers.lost:
            log.info(
                "closing Kafka connection from %s: not authenticated within %g s",
                self._connection.peer,
                AUTHENTICATION_TIMEOUT_S,
            )
            self._connection.close()

    def step(self, decoded: Decoded) -> None:
        """SaslHandshake or SaslAuthenticate, answered in order; a failure answers, then closes."""
        version = decoded.peek.api_version
        exchange = self.exchange
        response: ApiMessage
        failed: StrataError | None = None
        if decoded.api.key == apis.SASL_HANDSHAKE:
            mechanisms = list(exchange.mechanisms) if exchange is not None else []
            try:
                if exchange is None:
                    raise IllegalSaslState("this listener does not use SASL")
                exchange.handshake(decoded.request.mechanism, version)
            except (UnsupportedSaslMechanism, IllegalSaslState) as exc:
                failed = exc.with_traceback(None)  # a traceback kept in a local makes a cycle
            code = errors.NONE if failed is None else errors.kafka_error(failed)
            response = SaslHandshakeResponse[version](error_code=code, mechanisms=mechanisms)
        else:
            out = b""
            try:
                if exchange is None:
                    raise IllegalSaslState("this listener does not use SASL")
                out = exchange.authenticate(bytes(decoded.request.auth_bytes or b""))
            except (SaslAuthenticationFailed, IllegalSaslState) as exc:
                failed = exc.with_traceback(None)  # a traceback kept in a local makes a cycle
            if exchange is not None and exchange.state is State.AUTHENTICATED and failed is None:
                self._authenticated_as(exchange)
            response = SaslAuthenticateResponse[version](
                error_code=errors.NONE if failed is None else errors.kafka_error(failed),
                error_message=None if failed is None else failed.message,
                auth_bytes=out,
                session_lifetime_ms=0,
            )
        response.with_header(correlation_id=decoded.peek.correlation_id)
        answers = self._answers
        answers.fill(answers.new_slot(), response.encode(header=True, framed=True))
        if failed is not None and exchange is not None:
            # Without SASL on this listener, a stray SASL request is only answered (Kafka's behaviour).
            log.info("closing Kafka connection from %s: %s", self._connection.peer, failed.message)
            self._connection.finish()

    def raw_token(self, token: bytes) -> None:
        """A bare SASL token after a v0 handshake: a bare token answers it; a failure closes at once, as
        Kafka's broker does (v0 has no error field)."""
        exchange = self.exchange
        assert exchange is not None  # only a v0 handshake leads here
        try:
            out = exchange.authenticate(token)
        except (SaslAuthenticationFailed, IllegalSaslState) as exc:
            log.info("closing Kafka connection from %s: %s", self._connection.peer, exc.message)
            self._connection.close()
            return
        if exchange.state is State.AUTHENTICATED:
            self._authenticated_as(exchange)
        answers = self._answers
        answers.fill(answers.new_slot(), _SIZE.pack(len(out)) + out)

    def _authenticated_as(self, exchange: SaslExchange) -> None:
        assert exchange.principal is not None
        connection = self._connection
        log.info(
            "Kafka connection from %s authenticated as %r (%s%s)",
            connection.peer,
            exchange.principal.name,
            exchange.mechanism,
            ", v0" if exchange.raw else "",
        )
        connection.ctx = replace(connection.ctx, principal=exchange.principal)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
