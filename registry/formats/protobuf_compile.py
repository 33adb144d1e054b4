"""``.proto`` text compiled to ``FileDescriptorProto``s in-process, by grpcio-tools' protoc.

grpcio-tools bundles protoc as a Python extension, so no protoc binary and no subprocess are needed. Of its
two entry points, ``run_main`` (the command line) reports errors only by writing to the process's stderr
(file descriptor 2), which could be captured only by redirecting that descriptor for the whole process;
``get_protos`` (what ``grpc.protos()`` uses) raises ``ProtocErrors`` with each error's file, line, column
and message, and writes nothing. It returns the generated Python module of the file and of each of its
imports, dependencies first, and every generated module carries its file's serialized descriptor as the
one bytes argument of ``AddSerializedFile``: that is what this module reads. Those are the bytes
confluent-kafka's serializer sends for the same file (it registers ``DESCRIPTOR.serialized_pb`` of such a
module), so a schema registered as text and the same schema registered as a descriptor agree.

protoc reads files, so each compile gets a temporary directory holding the sources by import path, and
the built-ins' include roots after it (``protobuf_builtins``). The import paths come from clients, so each
is checked to stay inside that directory.
"""

from __future__ import annotations

import ast
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from google.protobuf import descriptor_pb2
from grpc_tools import _protoc_compiler

from registry.errors import InvalidSchema
from registry.formats import protobuf_builtins

FileProto = descriptor_pb2.FileDescriptorProto


@dataclass(frozen=True, slots=True)
class ProtocError:
    """One of protoc's errors; ``line`` and ``column`` count from 0 (-1: none), as ``get_protos`` gives
    them, columns in bytes with tabs to the next multiple of 8 (protoc's tokenizer)."""

    filename: str
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        # Counted from 1 in the message, as protoc's command line and editors count.
        where = f"{self.filename}:{self.line + 1}:{self.column + 1}" if self.line >= 0 else self.filename
        return f"{where}: {self.message}"


class ProtocRefused(InvalidSchema):
    """protoc refused the files: an invalid schema, with protoc's errors one by one (``errors``) for a
    caller that acts on some of them (``protobuf_undefined``)."""

    def __init__(self, errors: tuple[ProtocError, ...]) -> None:
        super().__init__("\n".join(str(error) for error in errors) or "protoc failed without a message")
        self.errors = errors


def check_import_path(name: str) -> None:
    """An import path is relative, ``/``-separated, and never leaves its root (no ``..``, no ``.``)."""
    if (
        name.startswith("/")
        or "\\" in name
        or "\x00" in name
        or any(part in ("", ".", "..") for part in name.split("/"))
    ):
        raise InvalidSchema(f"invalid import path for a reference: {name!r}")


def compile_proto(target: str, sources: Mapping[str, str]) -> FileProto:
    """Compile ``target``, one of ``sources`` (``.proto`` texts by import path) or a built-in, into its
    descriptor (its imports are compiled too, but their descriptors come from where they were
    registered). ``ProtocRefused`` carries protoc's errors, each as ``file:line:column: message``."""
    for name in sources:
        check_import_path(name)
    with tempfile.TemporaryDirectory(prefix="strata-proto-") as tmp:
        root = Path(tmp)
        try:
            _fill(root, target, sources)
        except OSError as exc:
            # Two import paths where one is the other's directory ("a" and "a/b.proto").
            raise InvalidSchema(f"references cannot be laid out as files: {exc.strerror}") from None
        includes = [str(path).encode() for path in (root, *protobuf_builtins.include_roots())]
        try:
            generated = _protoc_compiler.get_protos(target.encode(), includes)
        except _protoc_compiler.ProtocErrors as exc:
            raise ProtocRefused(tuple(_error(error) for error in exc.errors())) from None
    # Modules come imports first, the target's last.
    _module, code = generated[-1]
    return _descriptor_of(code)


def builtin_descriptor(name: str) -> FileProto | None:
    """A built-in file compiled (None if there is no such file); once per process, as the files do not
    change while it runs."""
    if not protobuf_builtins.exists(name):
        return None
    return FileProto.FromString(_compiled_builtin(name))


@cache
def _compiled_builtin(name: str) -> bytes:
    return compile_proto(name, {}).SerializeToString()


def _fill(root: Path, target: str, sources: Mapping[str, str]) -> None:
    # Only a file that names google/type/ can import one: skip the copies otherwise.
    if target.startswith("google/type/") or any("google/type/" in text for text in sources.values()):
        for name, path in protobuf_builtins.google_type_files().items():
            if name not in sources:
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, root / name)
    for name, text in sources.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def _error(error: object) -> ProtocError:
    line, column = getattr(error, "line", -1), getattr(error, "column", -1)
    return ProtocError(
        _text(getattr(error, "filename", b"")),
        line if isinstance(line, int) else -1,
        column if isinstance(column, int) else -1,
        _text(getattr(error, "message", b"")),
    )


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


# The one call in a generated module that carries the file's serialized descriptor, as a bytes literal.
_SERIALIZED = re.compile(rb"AddSerializedFile\((b'(?:[^'\\\n]|\\.)*')\)")


def _descriptor_of(code: bytes) -> FileProto:
    """The serialized descriptor in a generated module: the bytes literal passed to
    ``AddSerializedFile``, read as a Python literal (not by parsing the whole module, which costs far
    more). A module without one means protoc's Python generator changed shape."""
    found = _SERIALIZED.search(code)
    if found is None:
        raise RuntimeError("protoc's generated module has no AddSerializedFile(b'...') call")
    literal = ast.literal_eval(found.group(1).decode("ascii"))
    assert isinstance(literal, bytes)
    return FileProto.FromString(literal)
