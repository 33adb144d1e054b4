"""docker-compose.yml, the Dockerfile and the documentation, checked against the code they configure.

There is no Docker engine in CI, so the compose file is never run there. Instead these tests hold it to the
code: every STRATA_* variable is a setting of ``strata/settings.py`` with a value that setting accepts, every
``strata`` command parses with the real CLI parser, the services wait for what they need, and the bucket
and database they are pointed at are the ones the other services create. The documentation is checked the
same way: a STRATA_* variable in README.md or a page of docs/ (the benchmark log aside, whose commands set
variables of the benchmark scripts), or a setting, default, topic config or error code in the tables of
docs/configuration.md and docs/http-api.md, that the code does not have fails here.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from storage.errors import SettingsError, StrataError
from storage.objectstore import parse_store_url
from storage.topic_config import effective_configs
from strata.cli import build_parser, cmd_serve
from strata.settings import ROLES, SETTINGS, SETTINGS_BY_ENV, Setting, Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
README = ROOT / "README.md"
CONFIGURATION = ROOT / "docs" / "configuration.md"
HTTP_API = ROOT / "docs" / "http-api.md"
# The pages whose STRATA_* variables must be real: all but the benchmark log.
# The history of benchmark sessions quotes what past sessions set; it is no reference of today's settings.
DOC_PAGES = (
    README,
    *sorted(
        p for p in (ROOT / "docs").glob("*.md") if p.name not in ("benchmarks.md", "benchmarks-history.md")
    ),
)

AGENTS = ("agent-1", "agent-2")
STRATA_SERVICES = (*AGENTS, "worker")
EXPECTED_SERVICES = frozenset({"minio", "minio-init", "postgres", *STRATA_SERVICES})
EXPECTED_ROLE = {"agent-1": "agent", "agent-2": "agent", "worker": "worker"}

# STRATA_* variables that are not server settings, and the file that reads each (so this list cannot rot).
NOT_SETTINGS = {
    "STRATA_URL": "strata/client_commands.py",  # the CLI client's server
    "STRATA_TOKEN": "strata/client_commands.py",  # the CLI client's bearer token
    "STRATA_TEST_POSTGRES_URL": "tests/fixtures/metadata.py",  # the test suite's PostgreSQL
    "STRATA_TEST_WORKERS": "scripts/check",  # the test suite's pytest-xdist workers
    "STRATA_TEST_EXAMPLE_SCALE": "tests/examples.py",  # the property tests' example counts
    "STRATA_SPARK_JARS_DIR": "pipeline/jars.py",  # where Spark finds the hadoop-aws jars
    "STRATA_SPARK_MASTER": "strata/cli.py",  # the Spark master of `strata compact --spark`
}
_STRATA_VAR = re.compile(r"\bSTRATA_[A-Z][A-Z0-9_]*\b")


# --- loading -------------------------------------------------------------------------------------------
@functools.cache
def _compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{COMPOSE.name} is not a YAML mapping"
    services = data.get("services")
    assert isinstance(services, dict), f"{COMPOSE.name} has no services mapping"
    assert services, f"{COMPOSE.name} has no services"
    return data


def _service(name: str) -> dict[str, Any]:
    services: dict[str, Any] = _compose()["services"]
    assert name in services, f"{COMPOSE.name} has no service {name!r}"
    service = services[name]
    assert isinstance(service, dict), f"service {name!r} is not a mapping"
    return service


def _environment(name: str) -> dict[str, str]:
    """The service's environment as strings; both the mapping and the KEY=VALUE list forms."""
    raw = _service(name).get("environment") or {}
    pairs: list[tuple[str, object]] = []
    if isinstance(raw, dict):
        pairs = [(str(k), v) for k, v in raw.items()]
    elif isinstance(raw, list):
        for item in raw:
            item_key, sep, item_value = str(item).partition("=")
            pairs.append((item_key, item_value if sep else None))
    else:
        raise AssertionError(f"service {name!r}: environment must be a mapping or a list")
    env: dict[str, str] = {}
    for key, value in pairs:
        # Compose passes a null value through from the host, and YAML turns yes/no/on/off into booleans
        # that compose refuses: both are mistakes in a self-contained cluster file.
        assert value is not None, f"service {name!r}: {key} has no value (it would come from the host)"
        assert not isinstance(value, bool), f"service {name!r}: {key}: quote the value {value!r}"
        assert isinstance(value, str | int | float), f"service {name!r}: {key}: unsupported value {value!r}"
        env[key] = str(value)
    return env


def _command(name: str) -> list[str]:
    raw = _service(name).get("command")
    if raw is None:
        return []
    if isinstance(raw, str):
        return shlex.split(raw)
    assert isinstance(raw, list), f"service {name!r}: command must be a string or a list"
    return [str(part) for part in raw]


def _strata_services() -> list[str]:
    return sorted(name for name in _compose()["services"] if _command(name)[:1] == ["strata"])


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order; comments dropped and continuation lines joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = (pending + stripped).strip()
        pending = ""
        if full:
            keyword, _, rest = full.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    assert not pending, f"{DOCKERFILE.name} ends inside a continued line"
    return instructions


def _dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, rest in _dockerfile():
        if keyword != "ENV":
            continue
        words = shlex.split(rest)
        if len(words) >= 2 and "=" not in words[0]:  # legacy form: ENV KEY value with spaces
            env[words[0]] = " ".join(words[1:])
            continue
        for word in words:
            key, sep, value = word.partition("=")
            assert sep, f"{DOCKERFILE.name}: cannot read ENV {rest!r}"
            env[key] = value
    return env


# --- checking values -----------------------------------------------------------------------------------
def _value_problem(setting: Setting, raw: str) -> str | None:
    """Why ``raw`` is not a valid value of ``setting``, or None; the same rules as load_settings."""
    if raw == "":
        return f"{setting.env} is empty (an empty variable means 'unset'; remove it instead)"
    try:
        value = setting.type(raw)
    except ValueError as exc:
        return (
            f"{setting.env}={raw!r} does not parse as {getattr(setting.type, '__name__', 'its type')}: {exc}"
        )
    if setting.choices is not None and value not in setting.choices:
        return f"{setting.env}={raw!r} is not one of {', '.join(setting.choices)}"
    return None


def _strata_problems(where: str, env: Mapping[str, str]) -> list[str]:
    problems = []
    for key, raw in env.items():
        if not key.startswith("STRATA_"):
            continue
        setting = SETTINGS_BY_ENV.get(key)
        if setting is None:
            problems.append(f"{where}: {key} is not a setting of strata/settings.py")
            continue
        problem = _value_problem(setting, raw)
        if problem is not None:
            problems.append(f"{where}: {problem}")
    return problems


def _parse_strata(argv: list[str], where: str) -> argparse.Namespace:
    """Parse a ``strata ...`` command line with the real parser; a readable failure instead of SystemExit."""
    assert argv[:1] == ["strata"], f"{where}: {argv!r} is not a strata command"
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            return build_parser().parse_args(argv[1:])
    except SystemExit as exc:
        raise AssertionError(
            f"{where}: `{shlex.join(argv)}` is not a valid strata command (exit {exc.code}):\n"
            f"{stderr.getvalue().strip()}"
        ) from None


def _serve_settings(args: argparse.Namespace, env: Mapping[str, str], where: str) -> Settings:
    """The settings ``strata serve`` would run with: its flags over ``env``, exactly as cmd_serve does."""
    assert args.func is cmd_serve, f"{where}: expected `strata serve`, got `strata {args.command}`"
    try:
        return load_settings({s.name: getattr(args, s.name) for s in SETTINGS}, environ=env)
    except SettingsError as exc:
        raise AssertionError(f"{where}: strata serve would refuse to start: {exc.message}") from None


def _effective_env(name: str) -> dict[str, str]:
    """What a compose service built from the Dockerfile sees: the image's ENV, then the service's."""
    return {**_dockerfile_env(), **_environment(name)}


# --- docker-compose.yml --------------------------------------------------------------------------------
def test_expected_services_exist() -> None:
    missing = EXPECTED_SERVICES - set(_compose()["services"])
    assert not missing, f"{COMPOSE.name} lacks the services {sorted(missing)}"
    assert _service("minio")["image"].split(":")[0] == "minio/minio"
    assert _service("minio-init")["image"].split(":")[0] == "minio/mc"
    assert _service("postgres")["image"] == "postgres:16"
    for name in STRATA_SERVICES:
        assert _service(name).get("build") == ".", f"service {name!r} must be built from the Dockerfile"


def test_every_strata_variable_is_a_setting_with_a_valid_value() -> None:
    problems = []
    for name in sorted(_compose()["services"]):
        problems += _strata_problems(f"{COMPOSE.name} service {name!r}", _environment(name))
    assert not problems, "\n".join(problems)


def test_strata_services_are_configured_only_by_environment() -> None:
    """Wiring goes through STRATA_* (and boto3's AWS_*), never through flags: the role is the only flag."""
    for name in STRATA_SERVICES:
        assert _command(name) == ["strata", "serve", "--role", EXPECTED_ROLE[name]], (
            f"service {name!r}: command {_command(name)!r}"
        )
        env = _environment(name)
        others = sorted(k for k in env if not k.startswith(("STRATA_", "AWS_")))
        assert not others, f"service {name!r}: variables Strata does not read: {others}"


def test_every_strata_command_parses() -> None:
    services = _strata_services()
    assert set(STRATA_SERVICES) <= set(services), f"services running strata: {services}"
    for name in services:
        where = f"{COMPOSE.name} service {name!r}"
        args = _parse_strata(_command(name), where)
        if args.func is not cmd_serve:
            continue
        settings = _serve_settings(args, _effective_env(name), where)
        assert settings.role in ROLES
        if name in EXPECTED_ROLE:
            assert settings.role == EXPECTED_ROLE[name], f"{where}: role {settings.role!r}"


def test_agents_listen_where_their_ports_point() -> None:
    published = set()
    for name in AGENTS:
        where = f"{COMPOSE.name} service {name!r}"
        settings = _serve_settings(_parse_strata(_command(name), where), _effective_env(name), where)
        assert settings.host == "0.0.0.0", f"{where}: binds {settings.host}, unreachable from outside"
        ports = [str(p) for p in _service(name).get("ports", [])]
        assert len(ports) == 3, (
            f"{where}: expected the HTTP, Kafka and schema registry ports published: {ports}"
        )
        (
            (http_host, _, http_container),
            (kafka_host, _, kafka_container),
            (registry_host, _, registry_container),
        ) = (p.rpartition(":") for p in ports)
        assert http_container == str(settings.port), (
            f"{where}: publishes {ports[0]}, listens on {settings.port}"
        )
        assert registry_container == str(settings.schema_registry_port), (
            f"{where}: publishes {ports[2]}, the schema registry listens on {settings.schema_registry_port}"
        )
        # One port per Kafka lane: lane i listens on kafka_port + i and is advertised at the published
        # port + i, so both sides are ranges of `lanes` ports.
        lanes = settings.kafka_lanes
        ports_of = (
            f"{settings.kafka_port}-{settings.kafka_port + lanes - 1}"
            if lanes > 1
            else str(settings.kafka_port)
        )
        if lanes == 1:
            kafka_host = f"{kafka_host}-{kafka_host}"
        assert kafka_container == ports_of, (
            f"{where}: publishes {ports[1]}, Kafka listens on {lanes} ports from {settings.kafka_port}"
        )
        first, _, last = kafka_host.partition("-")
        assert int(last) - int(first) == lanes - 1, f"{where}: publishes {kafka_host} for {lanes} lanes"
        kafka_host = first
        # Kafka clients on the host connect where Metadata tells them: the published port.
        assert settings.kafka_advertised_port == int(kafka_host), f"{where}: advertises another port"
        assert settings.kafka_advertised_host == "127.0.0.1", f"{where}: advertises an unreachable host"
        published.add((http_host, kafka_host, registry_host))
    # agent-1's registry on the host at Confluent's 8081, where clients look for it by default.
    assert published == {("8080", "19092", "8081"), ("8082", "29092", "8083")}


def test_the_agents_are_one_kafka_cluster_with_distinct_wanted_ids() -> None:
    ids = []
    for name in AGENTS:
        where = f"{COMPOSE.name} service {name!r}"
        settings = _serve_settings(_parse_strata(_command(name), where), _effective_env(name), where)
        assert settings.kafka_cluster, f"{where}: not in the cluster view (STRATA_KAFKA_CLUSTER)"
        assert settings.kafka_lanes == 1, f"{where}: the cluster view shows one broker per agent"
        ids.append(settings.kafka_node_id)
    assert len(set(ids)) == len(ids), f"agents want the same node id: {ids}"


def test_strata_services_wait_for_postgres_and_the_bucket() -> None:
    for name in STRATA_SERVICES:
        depends = _service(name).get("depends_on")
        assert isinstance(depends, dict), f"service {name!r}: depends_on must be a mapping with conditions"
        assert depends.get("postgres") == {"condition": "service_healthy"}, f"{name}: {depends}"
        assert depends.get("minio-init") == {"condition": "service_completed_successfully"}, (
            f"{name}: {depends}"
        )
    init_depends = _service("minio-init").get("depends_on")
    assert init_depends == {"minio": {"condition": "service_healthy"}}, f"minio-init: {init_depends}"


def test_services_waited_for_as_healthy_have_a_healthcheck() -> None:
    for name in sorted(_compose()["services"]):
        depends = _service(name).get("depends_on") or {}
        if not isinstance(depends, dict):
            continue
        for target, spec in depends.items():
            if isinstance(spec, dict) and spec.get("condition") == "service_healthy":
                test = (_service(target).get("healthcheck") or {}).get("test")
                assert test, f"{name} waits for {target} to be healthy, but {target} has no healthcheck"


def _created_bucket() -> tuple[str, str]:
    """(alias, bucket) of the `mc mb [flags] ALIAS/BUCKET` that minio-init runs."""
    words = [w for part in _command("minio-init") for w in shlex.split(part)]
    assert "mb" in words, f"minio-init does not run `mc mb`: {words}"
    targets = [w for w in words[words.index("mb") + 1 :] if not w.startswith("-")]
    assert targets, f"minio-init: `mc mb` without a bucket: {words}"
    alias, sep, bucket = targets[0].partition("/")
    assert sep, f"minio-init: `mc mb {targets[0]}` is not ALIAS/BUCKET"
    assert bucket.strip("/"), f"minio-init: `mc mb {targets[0]}` names no bucket"
    return alias, bucket.strip("/")


def test_bucket_created_is_the_bucket_strata_uses() -> None:
    _, bucket = _created_bucket()
    for name in STRATA_SERVICES:
        url = _environment(name).get("STRATA_BUCKET")
        assert url, f"service {name!r} has no STRATA_BUCKET"
        try:
            location = parse_store_url(url)
        except StrataError as exc:
            raise AssertionError(f"service {name!r}: STRATA_BUCKET: {exc.message}") from None
        assert location.scheme == "s3", f"service {name!r}: STRATA_BUCKET={url} is not on MinIO"
        assert location.bucket == bucket, (
            f"service {name!r} uses bucket {location.bucket!r}, minio-init creates {bucket!r}"
        )


def test_minio_credentials_and_endpoint_agree() -> None:
    minio = _environment("minio")
    user, password = minio["MINIO_ROOT_USER"], minio["MINIO_ROOT_PASSWORD"]
    assert len(password) >= 8, "MinIO refuses to start with a root password shorter than 8 characters"
    alias, _ = _created_bucket()
    alias_url = urlsplit(_environment("minio-init")[f"MC_HOST_{alias}"])
    assert (alias_url.hostname, alias_url.port) == ("minio", 9000), alias_url
    assert (alias_url.username, alias_url.password) == (user, password), "minio-init's credentials"
    for name in STRATA_SERVICES:
        env = _environment(name)
        endpoint = urlsplit(env["STRATA_S3_ENDPOINT"])
        assert (endpoint.scheme, endpoint.hostname, endpoint.port) == ("http", "minio", 9000), (
            f"service {name!r}: STRATA_S3_ENDPOINT={env['STRATA_S3_ENDPOINT']}"
        )
        assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == (user, password), (
            f"service {name!r}: AWS credentials are not MinIO's root credentials"
        )
        assert env.get("AWS_DEFAULT_REGION") or env.get("STRATA_S3_REGION"), f"{name}: no region"


def test_metadata_url_points_at_the_postgres_service() -> None:
    pg = _environment("postgres")
    user = pg.get("POSTGRES_USER", "postgres")
    database = pg.get("POSTGRES_DB", user)
    for name in STRATA_SERVICES:
        raw = _environment(name).get("STRATA_METADATA", "")
        url = urlsplit(raw)
        where = f"service {name!r}: STRATA_METADATA={raw!r}"
        assert url.scheme in ("postgresql", "postgres"), where
        assert (url.hostname, url.port or 5432) == ("postgres", 5432), where
        assert url.path == f"/{database}", f"{where}: the database is {database!r}"
        assert url.username == user, f"{where}: the user is {user!r}"
        if pg.get("POSTGRES_HOST_AUTH_METHOD") != "trust":
            assert url.password == pg.get("POSTGRES_PASSWORD"), f"{where}: wrong password"


# --- Dockerfile ----------------------------------------------------------------------------------------
def test_dockerfile_builds_a_non_root_strata_image() -> None:
    instructions = _dockerfile()
    keywords = [k for k, _ in instructions]
    assert instructions[0] == ("FROM", "python:3.11-slim"), instructions[0]
    assert any(k == "RUN" and re.search(r"\bpip install \.(\s|$)", rest) for k, rest in instructions)
    users = [rest for k, rest in instructions if k == "USER"]
    assert users, f"{DOCKERFILE.name} has no USER: the image would run as root"
    assert users[-1].split(":")[0] not in ("root", "0"), f"the image runs as {users[-1]}"
    assert ("EXPOSE", "8080 9092 8081") in instructions  # HTTP, Kafka and the schema registry
    assert "ENTRYPOINT" not in keywords, "the default command must be a plain `strata ...` CMD"
    problems = _strata_problems(DOCKERFILE.name, _dockerfile_env())
    assert not problems, "\n".join(problems)


def test_dockerfile_default_command_is_a_valid_strata_command() -> None:
    cmds = [rest for k, rest in _dockerfile() if k == "CMD"]
    assert cmds, f"{DOCKERFILE.name} has no CMD"
    try:
        argv = json.loads(cmds[-1])
    except json.JSONDecodeError:
        raise AssertionError(f"CMD {cmds[-1]} must be in exec (JSON array) form") from None
    assert isinstance(argv, list), cmds[-1]
    assert all(isinstance(a, str) for a in argv), cmds[-1]
    where = f"{DOCKERFILE.name} CMD"
    settings = _serve_settings(_parse_strata(argv, where), _dockerfile_env(), where)
    assert settings.host == "0.0.0.0", f"{where}: binds {settings.host}, unreachable from outside"
    exposed = {port for k, rest in _dockerfile() if k == "EXPOSE" for port in rest.split()}
    last = settings.kafka_port + settings.kafka_lanes - 1  # a port per lane
    lanes = f"{settings.kafka_port}-{last}" if last > settings.kafka_port else str(last)
    ports = {str(settings.port), lanes, str(settings.schema_registry_port)}
    assert ports <= exposed, (
        f"{where}: listens on {settings.port}, Kafka {lanes}, registry {settings.schema_registry_port}"
    )


# --- README.md and docs/ ------------------------------------------------------------------------------
def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _table_rows(text: str, cell: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith("|") and cell in line]


def test_docs_mention_only_real_strata_variables() -> None:
    assert {CONFIGURATION, HTTP_API} <= set(DOC_PAGES)
    problems = []
    for page in DOC_PAGES:
        mentioned = set(_STRATA_VAR.findall(_text(page)))
        unknown = sorted(mentioned - set(SETTINGS_BY_ENV) - set(NOT_SETTINGS))
        if unknown:
            problems.append(
                f"{page.relative_to(ROOT)} mentions STRATA_* variables that are not settings: {unknown}"
            )
        for var, path in NOT_SETTINGS.items():
            if var in mentioned and var not in (ROOT / path).read_text(encoding="utf-8"):
                problems.append(f"{page.relative_to(ROOT)} mentions {var}, which {path} no longer reads")
    assert not problems, "\n".join(problems)


def _documented_default(setting: Setting) -> str:
    if setting.default is None:
        return "unset"
    if isinstance(setting.default, bool):
        return str(setting.default).lower()
    return str(setting.default)


def test_configuration_table_matches_settings() -> None:
    text = _text(CONFIGURATION)
    problems = []
    for setting in SETTINGS:
        rows = _table_rows(text, f"`{setting.env}`")
        if len(rows) != 1:
            problems.append(f"{setting.env}: expected one configuration table row, found {len(rows)}")
            continue
        for cell in (f"`{setting.flag}`", f"`{_documented_default(setting)}`"):
            if cell not in rows[0]:
                problems.append(f"{setting.env}: the row lacks {cell}: {rows[0].strip()}")
    assert not problems, "\n".join(problems)


def test_topic_config_table_matches_topic_config() -> None:
    text = _text(CONFIGURATION)
    problems = []
    for name, default in effective_configs({}).items():
        rows = _table_rows(text, f"`{name}`")
        if not any(f"`{default}`" in row for row in rows):
            problems.append(f"{name}: no table row with the default `{default}`")
    assert not problems, "\n".join(problems)


def _error_classes(cls: type[StrataError] = StrataError) -> list[type[StrataError]]:
    out = [cls]
    for sub in cls.__subclasses__():
        out += _error_classes(sub)
    return out


def test_error_table_lists_every_error_code() -> None:
    text = _text(HTTP_API)
    codes = {c.code for c in _error_classes() if c.__module__ == "storage.errors"}
    missing = sorted(code for code in codes if not _table_rows(text, f"`{code}`"))
    assert not missing, f"docs/http-api.md's error table lacks the codes {missing}"


def test_readme_quick_start_is_make_run_and_make_test() -> None:
    match = re.search(r"## Quick start\n.*?```[a-z]*\n(.*?)```", _text(README), re.DOTALL)
    assert match, "README.md has no '## Quick start' section with a code block"
    commands = [line.strip() for line in match.group(1).splitlines() if line.strip()]
    assert commands == ["make run", "make test"], commands
