"""hadoop-aws for s3a, without Maven.

Online users set ``spark.jars.packages`` to the hadoop-aws matching their Spark's Hadoop. Where Maven is
not reachable (this project's CI), the two jars come from the sdist of ``sagemaker-pyspark==1.4.5`` on
PyPI, which carries ``deps/jars/hadoop-aws-3.3.1.jar`` and ``deps/jars/aws-java-sdk-bundle-1.11.901.jar``.
It is downloaded with ``pip download --no-deps`` and only those two files are extracted: the package is
never installed, because it pins pyspark 3.3.0.

Run ``python -m pipeline.jars [DIR]`` to fetch them (``make test`` does).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from storage.errors import SparkSetupError as SparkSetupError  # re-exported: its callers import it from here

SDIST = "sagemaker-pyspark==1.4.5"
JARS = ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar")
ENV_DIR = "STRATA_SPARK_JARS_DIR"


def jars_dir() -> Path:
    configured = os.environ.get(ENV_DIR)
    return Path(configured) if configured else Path.home() / ".cache" / "strata" / "jars"


def jar_paths(directory: Path | None = None) -> list[Path]:
    """The two jars, or SparkSetupError saying how to get them."""
    directory = directory or jars_dir()
    paths = [directory / name for name in JARS]
    missing = [p.name for p in paths if not p.is_file() or p.stat().st_size == 0]
    if missing:
        raise SparkSetupError(
            f"hadoop-aws jars missing from {directory}: {', '.join(missing)}. Fetch them with "
            f"`python -m pipeline.jars {directory}` (or set {ENV_DIR}), or set spark.jars.packages to "
            "the hadoop-aws matching your Spark's Hadoop version."
        )
    return paths


def fetch_jars(directory: Path | None = None) -> list[Path]:
    directory = directory or jars_dir()
    try:
        return jar_paths(directory)
    except SparkSetupError:
        pass
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        result = subprocess.run([*command, SDIST, "-d", tmp], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise SparkSetupError(f"pip download {SDIST} failed: {result.stderr.strip()[-2000:]}")
        (sdist,) = Path(tmp).glob("*.tar.gz")
        with tarfile.open(sdist) as archive:
            for member in archive.getmembers():
                name = member.name.rsplit("/", 1)[-1]
                if name in JARS and member.name.endswith(f"deps/jars/{name}") and member.isfile():
                    source = archive.extractfile(member)
                    assert source is not None
                    # Written by name only: nothing from the archive decides where bytes land.
                    partial = directory / f".{name}.part"
                    with source, partial.open("wb") as out:
                        while block := source.read(1 << 20):
                            out.write(block)
                    partial.replace(directory / name)
    return jar_paths(directory)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    for path in fetch_jars(Path(args[0]) if args else None):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
