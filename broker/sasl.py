"""One connection's SASL exchange (Kafka's SaslHandshake v1 then SaslAuthenticate): sans-IO.

Mechanisms:
- ``PLAIN`` (RFC 4616): one SaslAuthenticate carrying ``authzid NUL authcid NUL password``; an authzid other
  than empty or the authcid is refused, as Kafka's PlainSaslServer does.
- ``SCRAM-SHA-256`` and ``SCRAM-SHA-512`` (RFC 5802 / 7677): client-first, server-first, client-final,
  server-final over two SaslAuthenticate round trips. The message syntax, nonces and proofs are scramp's
  (the SCRAM library pg8000 uses): a well-kept implementation of a protocol where a hand-written parser is
  an easy place for a mistake. An unknown user gets made-up credentials with a salt stable per name and
  no hashing per attempt (``Principals.scram_credential``), so the exchange fails at the proof like a
  wrong password does and neither its salt nor its timing tells which names exist.

The states: ``NEW`` (only ApiVersions and SaslHandshake are served) -> ``HANDSHAKEN`` (mechanism chosen)
-> ``AUTHENTICATED``; any failure -> ``FAILED``, after which the connection sends the error answer and
closes.

SaslHandshake v0 (Kafka before 1.0) is followed by raw tokens: each frame after it is the bare SASL token,
answered with a bare size-prefixed token (``raw``), until the exchange completes. Current clients send v1,
but librdkafka reads "SASL handshake supported" from ApiVersions advertising v0, so v0 is offered and
served.
"""

from __future__ import annotations

from enum import Enum, auto

from scramp import ScramException, ScramMechanism

from agents.principals import Principal, Principals
from storage.errors import IllegalSaslState, SaslAuthenticationFailed, UnsupportedSaslMechanism

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class State(Enum):
    NEW = auto()
    HANDSHAKEN = auto()
    AUTHENTICATED = auto()
    FAILED = auto()


# What the client is told on any failed authentication: the same for an unknown user and a wrong password.
_FAILED = "Authentication failed: invalid username or password"


class SaslExchange:
    def __init__(self, principals: Principals, mechanisms: tuple[str, ...] = MECHANISMS) -> None:
        self._principals = principals
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
        principal = self._principals.by_password(name, password)
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
        principal = self._principals.get(self._scram_user or "")
        if principal is None:  # unreachable: a made-up credential cannot produce a valid proof
            raise SaslAuthenticationFailed(_FAILED)
        self._done(principal)
        return final

    def _scram_credentials(self, name: str) -> tuple[bytes, bytes, bytes, int]:
        """scramp's auth_fn: the user's salted credentials, or made-up ones for an unknown user."""
        assert self.mechanism is not None
        self._scram_user = name
        credential = self._principals.scram_credential(self.mechanism, name)
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
