"""SCRAM credentials (RFC 5802, RFC 7677): what a server keeps of a password, how it is made from the salted
password a Kafka admin client sends (AlterUserScramCredentials), and how a password is checked against it.

A server keeps the salt, the iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
ServerKey = HMAC(SaltedPassword, "Server Key"), where SaltedPassword = PBKDF2-HMAC(password, salt,
iterations). Neither key gives back the password; checking one (HTTP Basic, SASL/PLAIN for a stored user)
salts it again and compares StoredKey. The password's bytes are its UTF-8, as Kafka's ScramFormatter and
librdkafka take them.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# Kafka's ScramMechanism type numbers, as DescribeUserScramCredentials and AlterUserScramCredentials carry
# them (0 is UNKNOWN).
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_OF_MECHANISM = {name: number for number, name in MECHANISM_TYPES.items()}
# RFC 7677's minimum; Kafka's kafka-configs --add-config SCRAM-SHA-256=[iterations=4096,...] default.
SCRAM_ITERATIONS = 4096
# Kafka's bounds for both mechanisms (ScramMechanism.minIterations / maxIterations).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int = SCRAM_ITERATIONS


def _digest(mechanism: str) -> str:
    return "sha512" if mechanism == "SCRAM-SHA-512" else "sha256"


def digest_size(mechanism: str) -> int:
    return hashlib.new(_digest(mechanism)).digest_size


def from_salted_password(
    mechanism: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """The credential a server keeps, from the salted password a client computed (Kafka's upsertion)."""
    name = _digest(mechanism)
    client_key = hmac.new(salted_password, b"Client Key", name).digest()
    stored_key = hashlib.new(name, client_key).digest()
    server_key = hmac.new(salted_password, b"Server Key", name).digest()
    return ScramCredential(salt, stored_key, server_key, iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_digest(mechanism), password.encode("utf-8"), salt, iterations)


def password_matches(mechanism: str, credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` gives ``credential``'s StoredKey (a PBKDF2 of ``iterations`` rounds)."""
    salted = salted_password(mechanism, password, credential.salt, credential.iterations)
    derived = from_salted_password(mechanism, credential.salt, salted, credential.iterations)
    return hmac.compare_digest(derived.stored_key, credential.stored_key)
