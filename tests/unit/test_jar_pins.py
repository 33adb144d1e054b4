"""pipeline/jars.py keeps only jars whose SHA-256 is the pinned one, and says which jar differs."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pipeline import jars
from storage.errors import SparkSetupError


def test_every_jar_has_a_pin_and_a_maven_path() -> None:
    for name, (path, digest) in jars.PINNED.items():
        assert path.endswith("/" + name)
        assert len(digest) == 64
        assert int(digest, 16) >= 0


def test_a_jar_with_other_bytes_is_refused_and_not_kept(tmp_path: Path) -> None:
    for name in jars.JARS:
        (tmp_path / name).write_bytes(b"not the jar")
    with pytest.raises(SparkSetupError) as caught:
        jars.verify_jars(tmp_path)
    assert hashlib.sha256(b"not the jar").hexdigest() in caught.value.message
    assert "pinned" in caught.value.message
    partial = tmp_path / f".{jars.JARS[0]}.part"
    partial.write_bytes(b"downloaded, but tampered with")
    with pytest.raises(SparkSetupError):
        jars._keep(partial, tmp_path, jars.JARS[0])
    assert not partial.exists()
    assert (tmp_path / jars.JARS[0]).read_bytes() == b"not the jar"  # the refused download replaced nothing
