"""``buf breaking`` (npm ``@bufbuild/buf``) as a test oracle for Protobuf compatibility: installing it, and
asking it about a pair of schemas.

``buf breaking NEW --against OLD`` with buf's WIRE category lists the changes that break reading old binary
data with the new schema: Strata's BACKWARD question (reader = new, writer = old); swapping the two asks
FORWARD's. WIRE_JSON would add JSON names, which Confluent's rules ignore.

buf is installed into ``.cache/buf`` (``make buf`` does the same) when it is missing; without npm, or if the
install fails, the caller's test fails.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.unit.registry.protobuf_pairs import Pair

ROOT = Path(__file__).resolve().parents[2]
BUF_VERSION = "1.75.0"
PREFIX = ROOT / ".cache" / "buf"
CATEGORY = "WIRE"


def install_buf() -> Path:
    """The buf binary, installed first if it is missing; its version checked."""
    binary = PREFIX / "node_modules" / ".bin" / "buf"
    if not binary.is_file():
        npm = shutil.which("npm")
        assert npm is not None, "npm is not installed: buf (npm @bufbuild/buf) cannot be installed"
        done = subprocess.run(
            [npm, "install", "--prefix", str(PREFIX), "--no-audit", "--no-fund", "--loglevel=error",
             f"@bufbuild/buf@{BUF_VERSION}"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"npm install @bufbuild/buf failed:\n{done.stderr}"
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert version.stdout.strip() == BUF_VERSION, version.stdout
    return binary


def _module(directory: Path, schema: str, files: dict[str, str]) -> None:
    directory.mkdir()
    (directory / "buf.yaml").write_text(f"version: v2\nbreaking:\n  use:\n    - {CATEGORY}\n")
    for name, text in {**files, "schema.proto": schema}.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)


def buf_breaking(buf: Path, workdir: Path, pair: Pair) -> list[str]:
    """buf's findings for the pair, new against old (empty: not breaking). ``workdir`` must be empty."""
    _module(workdir / "old", pair.old, pair.old_files)
    _module(workdir / "new", pair.new, pair.new_files)
    done = subprocess.run(
        [buf, "breaking", "new", "--against", "old", "--error-format", "json"],
        cwd=workdir, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    # buf exits 100 when it finds breaking changes, 0 when none; anything else is a failure to run.
    assert done.returncode in (0, 100), f"buf exited {done.returncode}:\n{done.stderr}"
    return [f"{item['type']}: {item['message']}" for item in map(json.loads, done.stdout.splitlines())]
