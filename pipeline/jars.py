"""hadoop-aws for s3a, without Maven.

Online users set ``spark.jars.packages`` to the hadoop-aws matching their Spark's Hadoop. Where Maven is
not reachable (this project's CI), the two jars come from the sdist of ``sagemaker-pyspark==1.4.5`` on
PyPI, which carries ``deps/jars/hadoop-aws-3.3.1.jar`` and ``deps/jars/aws-java-sdk-bundle-1.11.901.jar``.
It is downloaded with ``pip download --no-deps`` and only those two files are extracted: the package is
never installed, because it pins pyspark 3.3.0.

Run ``python -m pipeline.jars [DIR]`` to fetch them (``make test`` does).

The decoder jar (``strata-spark.jar``) is the Java source that ``read_topic`` decodes with
(``pipeline/jvm``), built here from its sources: ``javac --release 17`` against the jars pyspark ships,
packed with ``jar``, no Maven and no downloads. The jar records a fingerprint of what it was built from
(sha256 of the Java sources and resources and the pyspark version, in ``META-INF/strata-build-fingerprint``),
and ``decoder_jar`` rebuilds a jar that is missing or whose fingerprint differs, so a session never runs a
stale decoder. ``python -m pipeline.jars --decoder [DIR]`` builds it (``make spark-decoder``, which
``make test`` and ``make demo`` depend on). Building needs a JDK (javac and jar), not only a JRE.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from storage.errors import SparkSetupError as SparkSetupError  # re-exported: its callers import it from here

SDIST = "sagemaker-pyspark==1.4.5"
JARS = ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar")
ENV_DIR = "STRATA_SPARK_JARS_DIR"

DECODER_JAR = "strata-spark.jar"
JVM_PROJECT = Path(__file__).resolve().parent / "jvm"
JAVA_RELEASE = "17"
_JAVA_SOURCES = JVM_PROJECT / "src" / "main" / "java"
_JAVA_RESOURCES = JVM_PROJECT / "src" / "main" / "resources"
_FINGERPRINT_ENTRY = "META-INF/strata-build-fingerprint"


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


def pyspark_jars_dir() -> Path:
    """The jars pyspark ships (Spark, Hadoop, lz4-java, zstd-jni, snappy-java): what the decoder compiles
    against and runs with."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def _jvm_files() -> list[Path]:
    return sorted(
        p
        for root in (_JAVA_SOURCES, _JAVA_RESOURCES)
        if root.is_dir()
        for p in root.rglob("*")
        if p.is_file()
    )


def decoder_fingerprint() -> str | None:
    """sha256 of what the decoder jar is built from; None where the Java sources are not installed."""
    files = _jvm_files()
    if not files:
        return None
    import pyspark

    digest = hashlib.sha256(f"pyspark {pyspark.__version__}\0release {JAVA_RELEASE}\0".encode())
    for path in files:
        digest.update(path.relative_to(JVM_PROJECT).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _stored_fingerprint(jar: Path) -> str | None:
    try:
        with zipfile.ZipFile(jar) as archive:
            return archive.read(_FINGERPRINT_ENTRY).decode().strip()
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


def decoder_jar(directory: Path | None = None) -> Path:
    """The decoder jar in ``directory``, built first if it is missing or stale; SparkSetupError if it cannot
    be (no JDK, or neither a jar nor the Java sources)."""
    directory = directory or jars_dir()
    jar = directory / DECODER_JAR
    fingerprint = decoder_fingerprint()
    if fingerprint is None:  # installed without pipeline/jvm: take the jar as it is
        if jar.is_file():
            return jar
        raise SparkSetupError(
            f"{jar} is missing and the decoder's Java sources ({JVM_PROJECT}) are not here to build it: "
            f"build it in a checkout with `python -m pipeline.jars --decoder {directory}`"
        )
    if _stored_fingerprint(jar) == fingerprint:
        return jar
    return build_decoder_jar(directory)


def _jdk_tool(name: str) -> str:
    java_home = os.environ.get("JAVA_HOME")
    tool = Path(java_home) / "bin" / name if java_home else None
    if tool is not None and tool.is_file():
        return str(tool)
    found = None if java_home else shutil.which(name)
    if found is None:
        where = f"JAVA_HOME ({java_home}) has no bin/{name}" if java_home else f"no {name} on PATH"
        raise SparkSetupError(
            f"building the Strata decoder jar needs a JDK {JAVA_RELEASE} or newer ({where}): install a "
            "JDK, not only a JRE (Debian: apt-get install openjdk-17-jdk-headless), or set JAVA_HOME to one"
        )
    return found


def _run(command: list[str], what: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip()[-3000:]
        raise SparkSetupError(f"{what} failed building {DECODER_JAR}: {output}")


def build_decoder_jar(directory: Path | None = None) -> Path:
    """Compile ``pipeline/jvm`` and pack it as ``directory/strata-spark.jar`` (replaced atomically)."""
    directory = directory or jars_dir()
    fingerprint = decoder_fingerprint()
    if fingerprint is None:
        raise SparkSetupError(f"no Java sources under {JVM_PROJECT} to build {DECODER_JAR} from")
    javac, jar_tool = _jdk_tool("javac"), _jdk_tool("jar")
    sources = [str(p) for p in _jvm_files() if p.suffix == ".java"]
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory, prefix=".strata-spark-build-") as tmp:
        classes = Path(tmp) / "classes"
        classpath = str(pyspark_jars_dir() / "*")  # javac expands the wildcard itself
        command = [javac, "--release", JAVA_RELEASE, "-encoding", "UTF-8", "-nowarn", "-d", str(classes)]
        _run([*command, "-cp", classpath, *sources], "javac")
        if _JAVA_RESOURCES.is_dir():
            shutil.copytree(_JAVA_RESOURCES, classes, dirs_exist_ok=True)
        (classes / _FINGERPRINT_ENTRY).write_text(fingerprint + "\n")
        built = Path(tmp) / DECODER_JAR
        _run([jar_tool, "--create", "--file", str(built), "-C", str(classes), "."], "jar")
        built.replace(directory / DECODER_JAR)
    return directory / DECODER_JAR


def main(argv: list[str] | None = None) -> int:
    """``python -m pipeline.jars [DIR]`` fetches hadoop-aws; ``--decoder [DIR]`` builds the decoder jar."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--decoder"]:
        print(build_decoder_jar(Path(args[1]) if len(args) > 1 else None))
        return 0
    for path in fetch_jars(Path(args[0]) if args else None):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
