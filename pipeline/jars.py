"""The jars Strata's Spark runs with: hadoop-aws for s3a and Apache Iceberg's Spark runtime, each pinned by
SHA-256, and the decoder jar built from this checkout.

Online users may set ``spark.jars.packages`` to the hadoop-aws matching their Spark's Hadoop. Here the two
jars, ``hadoop-aws-3.3.1.jar`` and ``aws-java-sdk-bundle-1.11.901.jar``, come from Maven Central, each
checked against the SHA-256 pinned in ``PINNED`` before it is kept. Where Maven Central is not reachable
they come from the sdist of ``sagemaker-pyspark==1.4.5`` on PyPI, which carries the same two files
(byte for byte: the same SHA-256), downloaded with ``pip download --no-deps``; only those two files are
extracted (the package is never installed: it pins pyspark 3.3.0), and they pass the same check. A jar
whose hash differs stops the fetch with a message naming the jar and both hashes, and nothing is kept.

Apache Iceberg's Spark runtime (``iceberg-spark-runtime-4.1_2.13``) is how Spark reads the lake's Iceberg
tables through an agent's REST catalog (``pipeline/lake/spark_catalog.py``): Iceberg's own reader, the
reference implementation of the format, rather than one of Strata's. It is built for one Spark minor version
and Scala 2.13, which is why pyproject.toml pins pyspark to 4.1 (Maven Central has no runtime for a newer
Spark). ``iceberg-aws-bundle`` beside it carries the AWS SDK v2 that Iceberg's ``S3FileIO`` reads s3:// tables
with (the runtime bundles no AWS SDK), so the lake's files are read with the endpoint and path-style
addressing the catalog's config answers, independently of the older hadoop-aws s3a needs. Both come from Maven
Central only (no PyPI package carries them), pinned and checked the same way.

Run ``python -m pipeline.jars [DIR]`` to fetch them (``make test`` does), and ``python -m pipeline.jars
--verify [DIR]`` to check the jars a directory holds (``scripts/check`` does).

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
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
ICEBERG_VERSION = "1.12.0"
# The Spark minor version the runtime is built for (its artifact's name): a session refuses another pyspark.
ICEBERG_SPARK = "4.1"
ICEBERG_ARTIFACT = f"iceberg-spark-runtime-{ICEBERG_SPARK}_2.13"
ICEBERG_RUNTIME = f"{ICEBERG_ARTIFACT}-{ICEBERG_VERSION}.jar"
ICEBERG_AWS = f"iceberg-aws-bundle-{ICEBERG_VERSION}.jar"
# Each jar: its path on Maven Central, and the SHA-256 of its bytes there (the .sha256 Maven Central serves).
PINNED = {
    "hadoop-aws-3.3.1.jar": (
        "org/apache/hadoop/hadoop-aws/3.3.1/hadoop-aws-3.3.1.jar",
        "6be50ad8a8b445d2802381b085b2a3ede5c29d353450a6a21f16b2fefa962b6e",
    ),
    "aws-java-sdk-bundle-1.11.901.jar": (
        "com/amazonaws/aws-java-sdk-bundle/1.11.901/aws-java-sdk-bundle-1.11.901.jar",
        "b87175b32a16544cc1b37cf40390eb375833e62bed67f8ce6cde4b7ad6429ead",
    ),
    ICEBERG_RUNTIME: (
        f"org/apache/iceberg/{ICEBERG_ARTIFACT}/{ICEBERG_VERSION}/{ICEBERG_RUNTIME}",
        "3123c3798af642dd537230923548e013ef41cc28b6626e5225808cf5670a0f82",
    ),
    ICEBERG_AWS: (
        f"org/apache/iceberg/iceberg-aws-bundle/{ICEBERG_VERSION}/{ICEBERG_AWS}",
        "dd7e49ffa4ac9b215bed846581991259e3aec9bb2fa08d6cec029c46cd66d957",
    ),
}
JARS = tuple(PINNED)
HADOOP_AWS_JARS = ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar")
ICEBERG_JARS = (ICEBERG_RUNTIME, ICEBERG_AWS)
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


def jar_paths(directory: Path | None = None, names: tuple[str, ...] = HADOOP_AWS_JARS) -> list[Path]:
    """The jars ``names`` (hadoop-aws's two unless told), or SparkSetupError saying how to get them."""
    directory = directory or jars_dir()
    paths = [directory / name for name in names]
    missing = [p.name for p in paths if not p.is_file() or p.stat().st_size == 0]
    if missing:
        online = (
            f"org.apache.iceberg:{ICEBERG_ARTIFACT}:{ICEBERG_VERSION} and iceberg-aws-bundle"
            if names == ICEBERG_JARS
            else "the hadoop-aws matching your Spark's Hadoop version"
        )
        raise SparkSetupError(
            f"Spark jars missing from {directory}: {', '.join(missing)}. Fetch them with "
            f"`python -m pipeline.jars {directory}` (or set {ENV_DIR}), or set spark.jars.packages to "
            f"{online}."
        )
    return paths


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def verify_jars(directory: Path | None = None) -> list[Path]:
    """Every pinned jar, each checked against its SHA-256; SparkSetupError naming a jar that differs."""
    paths = jar_paths(directory, JARS)
    for path in paths:
        _check_pin(path, path.name)
    return paths


def _check_pin(path: Path, name: str) -> None:
    expected = PINNED[name][1]
    actual = sha256_of(path)
    if actual != expected:
        raise SparkSetupError(
            f"{name} has SHA-256 {actual}, not the pinned {expected}: it is not the jar Maven Central "
            "publishes. It was not kept; fetch it again, and check the network path if this repeats."
        )


def fetch_jars(directory: Path | None = None) -> list[Path]:
    """Every pinned jar in ``directory``, fetched where missing or wrong: from Maven Central, else
    (hadoop-aws's two only) from the PyPI sdist."""
    directory = directory or jars_dir()
    directory.mkdir(parents=True, exist_ok=True)
    wanted = [name for name in JARS if not _good(directory / name, name)]
    missing = [name for name in wanted if not _from_maven(directory, name)]
    unreachable = [name for name in missing if name not in HADOOP_AWS_JARS]
    if unreachable:
        raise SparkSetupError(
            f"Maven Central ({MAVEN_CENTRAL}) did not answer for {', '.join(unreachable)}, which only it "
            "publishes: fetch again where it is reachable, or put the jars (SHA-256 as pipeline/jars.py "
            f"pins them) in {directory}"
        )
    if missing:
        _from_sdist(directory, missing)
    return verify_jars(directory)


def _good(path: Path, name: str) -> bool:
    return path.is_file() and sha256_of(path) == PINNED[name][1]


def _keep(partial: Path, directory: Path, name: str) -> None:
    """Check a downloaded jar against its pin; keep it under its name, or delete it and raise."""
    try:
        _check_pin(partial, name)
    except SparkSetupError:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(directory / name)


def _from_maven(directory: Path, name: str) -> bool:
    """Fetched from Maven Central (True), or Maven Central not reachable (False)."""
    import urllib.error
    import urllib.request

    partial = directory / f".{name}.part"
    try:
        url = f"{MAVEN_CENTRAL}/{PINNED[name][0]}"
        with urllib.request.urlopen(url, timeout=60) as response, partial.open("wb") as out:
            while block := response.read(1 << 20):
                out.write(block)
    except (urllib.error.URLError, OSError):
        partial.unlink(missing_ok=True)
        return False
    _keep(partial, directory, name)
    return True


def _from_sdist(directory: Path, names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        result = subprocess.run([*command, SDIST, "-d", tmp], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise SparkSetupError(f"pip download {SDIST} failed: {result.stderr.strip()[-2000:]}")
        (sdist,) = Path(tmp).glob("*.tar.gz")
        with tarfile.open(sdist) as archive:
            for member in archive.getmembers():
                name = member.name.rsplit("/", 1)[-1]
                if name in names and member.name.endswith(f"deps/jars/{name}") and member.isfile():
                    source = archive.extractfile(member)
                    assert source is not None
                    # Written by name only: nothing from the archive decides where bytes land.
                    partial = directory / f".{name}.part"
                    with source, partial.open("wb") as out:
                        while block := source.read(1 << 20):
                            out.write(block)
                    _keep(partial, directory, name)


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
    """``python -m pipeline.jars [DIR]`` fetches the pinned jars; ``--verify [DIR]`` checks them against
    the pins; ``--decoder [DIR]`` builds the decoder jar."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--decoder"]:
        print(build_decoder_jar(Path(args[1]) if len(args) > 1 else None))
        return 0
    if args[:1] == ["--verify"]:
        try:
            paths = verify_jars(Path(args[1]) if len(args) > 1 else None)
        except SparkSetupError as exc:
            print(exc.message, file=sys.stderr)
            return 1
        for path in paths:
            print(f"{path}: SHA-256 as pinned")
        return 0
    for path in fetch_jars(Path(args[0]) if args else None):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
