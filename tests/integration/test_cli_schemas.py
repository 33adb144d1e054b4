"""``strata schemas`` as a user runs it, against a live server's schema registry: list, register (from a file
or stdin, with --type and --references), check (against the latest version, one version, or what the level
names, with every reason), delete (soft, then --permanent), the registry's error codes as one-line errors,
and the same --token (or STRATA_TOKEN) as the other client commands."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from strata.cli import build_parser, main
from tests.fixtures.server import RunningServer, local_settings, run_server

pytestmark = pytest.mark.integration


def avro(*extra: dict[str, object]) -> str:
    fields = [{"name": "name", "type": "string"}, *extra]
    return json.dumps({"type": "record", "name": "User", "namespace": "shop", "fields": fields})


V1 = avro()
V2 = avro({"name": "age", "type": "int", "default": 0})
NO_DEFAULT = avro({"name": "email", "type": "string"})  # not BACKWARD: V1 data has no email
MONEY = 'syntax = "proto3";\npackage shop;\nmessage Money { int64 cents = 1; }\n'
ORDER = (
    'syntax = "proto3";\npackage shop;\nimport "shop/money.proto";\nmessage Order { shop.Money total = 1; }\n'
)
PRINCIPALS = """
[principals.ops]
password = "ops-pw-1"
tokens = ["ops-token"]
subjects = { admin = ["orders-"] }

[principals.viewer]
password = "viewer-pw-1"
tokens = ["viewer-token"]
subjects = { read = ["orders-"] }
"""


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[RunningServer]:
    with run_server(local_settings(tmp_path, kafka_port=-1)) as running:
        yield running


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_register_list_check_and_delete(
    srv: RunningServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = ("--url", srv.url)
    assert run(capsys, "schemas", "list", *url) == (0, "", "")
    code, out, _ = run(capsys, "schemas", "register", "orders-value", write(tmp_path, "v1.avsc", V1), *url)
    assert (code, out) == (0, "registered orders-value version 1 (schema id 1)\n")
    monkeypatch.setattr("sys.stdin", io.StringIO(V2))
    code, out, _ = run(capsys, "schemas", "register", "orders-value", *url)  # from stdin
    assert (code, out) == (0, "registered orders-value version 2 (schema id 2)\n")

    # Protobuf, with a reference given inline and from a file.
    money = write(tmp_path, "money.proto", MONEY)
    assert run(capsys, "schemas", "register", "money", money, "-t", "protobuf", *url)[0] == 0
    refs = json.dumps([{"name": "shop/money.proto", "subject": "money", "version": 1}])
    order = write(tmp_path, "order.proto", ORDER)
    code, out, _ = run(
        capsys, "schemas", "register", "orders-proto", order, "--type", "PROTOBUF", "-r", refs, *url
    )
    assert (code, out) == (0, "registered orders-proto version 1 (schema id 4)\n")
    refs_file = write(tmp_path, "refs.json", refs)
    code, out, _ = run(
        capsys, "schemas", "register", "other-proto", order, "-t", "PROTOBUF", "-r", f"@{refs_file}", *url
    )
    assert (code, out) == (0, "registered other-proto version 1 (schema id 4)\n")
    # Without its reference, the import does not resolve: the registry's 42201, one line.
    code, _, err = run(capsys, "schemas", "register", "third-proto", order, "-t", "PROTOBUF", *url)
    assert code == 1
    assert err.startswith("error 42201: ")

    code, out, _ = run(capsys, "schemas", "list", *url)
    assert out.split() == ["money", "orders-proto", "orders-value", "other-proto"]
    assert run(capsys, "schemas", "list", "--prefix", "orders-", *url)[1].split() == [
        "orders-proto",
        "orders-value",
    ]
    code, out, _ = run(capsys, "schemas", "list", "orders-value", *url)
    assert out.splitlines() == ["1\t1\tAVRO\tlive", "2\t2\tAVRO\tlive"]
    code, out, _ = run(capsys, "schemas", "list", "orders-proto", "--json", *url)
    (version,) = json.loads(out)
    assert (version["schemaType"], version["references"][0]["subject"]) == ("PROTOBUF", "money")

    # check: compatible against the latest version, incompatible with every reason and exit status 1.
    v2 = write(tmp_path, "v2.avsc", V2)
    assert run(capsys, "schemas", "check", "orders-value", v2, *url) == (
        0,
        "compatible with orders-value (version latest)\n",
        "",
    )
    bad = write(tmp_path, "bad.avsc", NO_DEFAULT)
    code, out, _ = run(capsys, "schemas", "check", "orders-value", bad, "--version", "1", *url)
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "incompatible with orders-value (version 1):"
    assert lines[1].startswith("  - ")
    assert "email" in out
    code, out, _ = run(capsys, "schemas", "check", "orders-value", bad, "--all", *url)
    assert code == 1
    assert out.startswith("incompatible with orders-value (the versions its compatibility level names):")
    code, _, err = run(capsys, "schemas", "register", "orders-value", bad, *url)
    assert code == 1
    assert err.startswith("error 409: Incompatible schema, compatibility_mode=BACKWARD")

    # delete: a version soft, then permanently; the subject permanently only once soft-deleted.
    code, out, _ = run(capsys, "schemas", "delete", "orders-value", "2", *url)
    assert (code, out) == (0, "soft-deleted orders-value version 2\n")
    assert run(capsys, "schemas", "list", "orders-value", *url)[1].splitlines() == ["1\t1\tAVRO\tlive"]
    code, out, _ = run(capsys, "schemas", "list", "orders-value", "--deleted", *url)
    assert out.splitlines() == ["1\t1\tAVRO\tlive", "2\t2\tAVRO\tsoft-deleted"]
    code, out, _ = run(capsys, "schemas", "delete", "orders-value", "2", "--permanent", *url)
    assert (code, out) == (0, "permanently deleted orders-value version 2\n")
    code, _, err = run(capsys, "schemas", "delete", "orders-value", "--permanent", *url)
    assert code == 1
    assert err.startswith("error 40405: Subject 'orders-value' was not deleted first")
    assert (
        run(capsys, "schemas", "delete", "orders-value", *url)[1]
        == "soft-deleted orders-value: version(s) 1\n"
    )
    code, out, _ = run(capsys, "schemas", "delete", "orders-value", "--permanent", *url)
    assert (code, out) == (0, "permanently deleted orders-value: version(s) 1\n")


def test_errors_are_the_registrys_code_and_message(
    srv: RunningServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ("--url", srv.url)
    v1 = write(tmp_path, "v1.avsc", V1)
    assert run(capsys, "schemas", "list", "nope", *url) == (1, "", "error 40401: Subject 'nope' not found.\n")
    code, _, err = run(capsys, "schemas", "check", "nope", v1, *url)
    assert (code, err) == (1, "error 40402: Version latest not found.\n")
    assert run(capsys, "schemas", "register", "orders-value", v1, *url)[0] == 0
    code, _, err = run(capsys, "schemas", "delete", "orders-value", "7", *url)
    assert (code, err) == (1, "error 40402: Version 7 not found.\n")
    code, _, err = run(capsys, "schemas", "delete", "orders-value", "first", *url)
    assert code == 1
    assert err.startswith("error 42202: ")
    code, _, err = run(capsys, "schemas", "register", "orders-value", write(tmp_path, "x.avsc", "{"), *url)
    assert code == 1
    assert err.startswith("error 42201: ")
    code, _, err = run(capsys, "schemas", "register", "orders-value", v1, "-r", "[not json", *url)
    assert code == 1
    assert err.startswith("--references is not JSON")
    missing = str(tmp_path / ("a-directory-deeper-than-a-terminal-is-wide-" * 3) / "missing.avsc")
    code, _, err = run(capsys, "schemas", "register", "orders-value", missing, *url)
    assert code == 1
    assert missing in err  # unwrapped
    code, _, err = run(capsys, "schemas", "list", "--url", "http://127.0.0.1:9")
    assert code == 1
    assert "cannot reach" in err


def test_the_token_and_the_permissions_are_the_registrys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    principals = write(tmp_path, "principals.toml", PRINCIPALS)
    Path(principals).chmod(0o600)
    v1 = write(tmp_path, "v1.avsc", V1)
    with run_server(local_settings(tmp_path, kafka_port=-1, principals_file=principals)) as srv:
        url = ("--url", srv.url)
        code, _, err = run(capsys, "schemas", "list", *url)
        assert (code, err) == (1, "error 401: Unauthorized: missing or invalid credentials\n")
        code, out, _ = run(capsys, "schemas", "register", "orders-value", v1, "--token", "ops-token", *url)
        assert (code, out) == (0, "registered orders-value version 1 (schema id 1)\n")
        code, _, err = run(capsys, "schemas", "register", "payments-value", v1, "--token", "ops-token", *url)
        assert code == 1
        assert err.startswith("error 40301: principal 'ops' may not WRITE subject 'payments-value'")
        monkeypatch.setenv("STRATA_TOKEN", "viewer-token")
        assert run(capsys, "schemas", "list", *url)[1] == "orders-value\n"
        assert run(capsys, "schemas", "list", "orders-value", *url)[1] == "1\t1\tAVRO\tlive\n"
        code, _, err = run(capsys, "schemas", "check", "orders-value", v1, *url)
        assert code == 1
        assert err.startswith("error 40301: principal 'viewer' may not WRITE subject 'orders-value'")
        code, _, err = run(capsys, "schemas", "delete", "orders-value", *url)
        assert code == 1
        assert err.startswith("error 40301: principal 'viewer' may not DELETE subject 'orders-value'")


def test_every_schemas_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["schemas"],
        ["schemas", "list"],
        ["schemas", "register"],
        ["schemas", "check"],
        ["schemas", "delete"],
    ):
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args([*argv, "--help"])
        assert exited.value.code == 0
        assert "usage: strata schemas" in capsys.readouterr().out
