"""TLS on both front doors: one certificate and key (STRATA_TLS_CERT_FILE / _KEY_FILE) serve the Kafka
listener to real clients with security.protocol=SSL, and HTTPS; a plaintext client on the TLS port fails
without harming the agent. The certificate is made here with cryptography (which moto depends on), so no
openssl binary is needed."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.fixtures.processes import free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def cert(tmp_path: Path) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and localhost, and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    crt, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    crt.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return str(crt), str(key_path)


def test_kafka_clients_over_tls(kafka_factory: Callable[..., Any], cert: tuple[str, str]) -> None:
    crt, key = cert
    with kafka_factory(tls_cert_file=crt, tls_key_file=key) as broker:
        tls = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL", "ssl.ca.location": crt}
        admin = AdminClient(tls)
        admin.create_topics([NewTopic("sealed", num_partitions=1, replication_factor=1)])["sealed"].result(10)
        # A plaintext client on the TLS port gets nowhere, and the agent keeps serving.
        plain = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 2000})
        with pytest.raises(KafkaException):
            plain.list_topics(timeout=3)
        producer = Producer({**tls, "linger.ms": 5})
        for i in range(20):
            producer.produce("sealed", key=f"k{i}".encode(), value=f"secret-{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({**tls, "group.id": "tls-g"})
        try:
            consumer.assign([TopicPartition("sealed", 0, 0)])
            got = []
            deadline = time.time() + 30
            while len(got) < 20 and time.time() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    got.append(msg.value())
            assert got == [f"secret-{i}".encode() for i in range(20)]
        finally:
            consumer.close()


def test_https_with_the_same_certificate(tmp_path: Path, cert: tuple[str, str]) -> None:
    crt, key = cert
    port = free_port()
    strata = str(Path(sys.executable).parent / "strata")
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [
            strata,
            "serve",
            "--data-dir",
            str(tmp_path / "data"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--kafka-port",
            "-1",
            "--schema-registry-port",
            "-1",
            "--tls-cert-file",
            crt,
            "--tls-key-file",
            key,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    trust = ssl.create_default_context(cafile=crt)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                response = httpx.get(f"https://127.0.0.1:{port}/healthz", verify=trust, timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
                time.sleep(0.2)
        assert response.status_code == 200
        with pytest.raises(httpx.TransportError):  # plaintext HTTP on the TLS port
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).raise_for_status()
    finally:
        proc.terminate()
        proc.wait(15)
        log.close()


def test_a_missing_certificate_stops_start_up_with_its_name(tmp_path: Path, cert: tuple[str, str]) -> None:
    crt, key = cert
    strata = str(Path(sys.executable).parent / "strata")
    base = [strata, "serve", "--data-dir", str(tmp_path / "data"), "--host", "127.0.0.1"]
    base += ["--port", str(free_port()), "--kafka-port", str(free_port()), "--schema-registry-port", "-1"]
    missing = str(tmp_path / ("a-directory-deeper-than-a-terminal-is-wide-" * 3) / "missing.pem")
    pairs = ((missing, key), (crt, missing), (key, crt))
    # Started side by side: each spends its seconds importing before it refuses to start.
    starts = [
        subprocess.Popen(
            [*base, "--tls-cert-file", cert_file, "--tls-key-file", key_file],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for cert_file, key_file in pairs
    ]
    half = subprocess.Popen(
        [*base, "--tls-cert-file", crt], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        for (cert_file, _), start in zip(pairs, starts, strict=True):
            message, _ = start.communicate(timeout=60)  # one line, unwrapped, however long its paths
            assert start.returncode == 1
            assert "cannot load the TLS certificate" in message
            assert cert_file in message
        message, _ = half.communicate(timeout=60)
        assert half.returncode == 1
        assert "needs both" in " ".join(message.split())
    finally:
        for proc in (*starts, half):
            if proc.poll() is None:  # an agent that started after all: the assertions above failed
                proc.kill()
                proc.wait()


def test_a_client_that_does_not_trust_the_certificate_fails(
    kafka_factory: Callable[..., Any], cert: tuple[str, str]
) -> None:
    crt, key = cert
    with kafka_factory(tls_cert_file=crt, tls_key_file=key) as broker:
        untrusting = AdminClient(
            {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL", "socket.timeout.ms": 2000}
        )
        with pytest.raises(KafkaException):
            untrusting.list_topics(timeout=3)
        trusting = AdminClient(
            {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL", "ssl.ca.location": crt}
        )
        assert trusting.list_topics(timeout=10).brokers  # and the agent still serves
