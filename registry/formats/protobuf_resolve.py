"""A Protobuf schema's files: its references and built-in imports resolved into ``FileDescriptorProto``s,
each after the files it imports.

A schema, and each of its references, arrives either as ``.proto`` text or as a base64
``FileDescriptorProto`` (confluent-kafka's serializer registers every file that way, its references
included). References come in dependency order, so they are resolved front to back:
- a text reference is compiled by protoc among the references before it, and its descriptor kept (custom
  options that no import defines are taken out of the text the later files compile against:
  ``protobuf_undefined``);
- a descriptor reference is decoded, named by its import path (the name its importers use), checked by
  building it into a descriptor pool with its imports, and printed, so that a later text file can import it.
An import that is not a reference resolves to a built-in (``protobuf_builtins``), or is an error.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError

from registry.errors import InvalidSchema
from registry.formats.base import Resolved, SchemaType
from registry.formats.protobuf_compile import builtin_descriptor, check_import_path
from registry.formats.protobuf_option_scan import UndefinedOption
from registry.formats.protobuf_options import UnprintableOption
from registry.formats.protobuf_print import print_file
from registry.formats.protobuf_undefined import compile_accepting_undefined

FileProto = descriptor_pb2.FileDescriptorProto
# The name Confluent gives a schema's own file when it has none (ProtobufSchema.DEFAULT_NAME).
DEFAULT_NAME = "default"


def decode_descriptor(text: str) -> FileProto | None:
    """The ``FileDescriptorProto`` that ``text`` holds as base64, or None if ``text`` is not base64 (then
    it is ``.proto`` source, which always has characters base64 does not). ``InvalidSchema`` if it is
    base64 but not a descriptor."""
    try:
        blob = base64.b64decode(text.strip(), validate=True)
    except ValueError:  # binascii.Error, or a character outside ASCII
        return None
    try:
        return FileProto.FromString(blob)
    except DecodeError as exc:
        raise InvalidSchema(f"not a serialized FileDescriptorProto: {exc}") from None


def build_pool(files: Sequence[FileProto]) -> descriptor_pool.DescriptorPool:
    """A private descriptor pool holding ``files`` (imports first); building it is what checks a
    descriptor that protoc did not compile (names resolve, numbers and names are unique, ...)."""
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        try:
            pool.AddSerializedFile(file.SerializeToString())
        except TypeError as exc:
            raise InvalidSchema(f"{file.name}: {exc}") from None
    return pool


def printed(
    file: FileProto,
    pool: descriptor_pool.DescriptorPool,
    *,
    normalized: bool = False,
    undefined: Sequence[UndefinedOption] = (),
) -> str:
    """``file`` printed; ``normalized``: as the canonical text, options by name (protobuf_print);
    ``undefined``: the custom options no import defines, printed at their elements."""
    extra: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for option in undefined:
        extra.setdefault((option.kind, option.scope), []).append((option.sort_key, option.assignment))
    try:
        return print_file(file, pool, options_by_name=normalized, extra_options=extra)
    except UnprintableOption as exc:
        raise InvalidSchema(f"{file.name}: {exc}") from None


@dataclass(frozen=True, slots=True)
class CompiledSchema:
    files: list[FileProto]
    undefined: tuple[UndefinedOption, ...]


class Resolver:
    """The references of one schema, resolved in the order given."""

    def __init__(self, references: Sequence[Resolved]) -> None:
        # .proto sources by import path (a descriptor reference printed), for protoc.
        self.sources: dict[str, str] = {}
        # Each reference's own descriptor by import path; a descriptor reference as it was registered.
        self.files: dict[str, FileProto] = {}
        for reference in references:
            self._add(reference)

    def _add(self, reference: Resolved) -> None:
        check_import_path(reference.name)
        if reference.schema_type != SchemaType.PROTOBUF:
            raise InvalidSchema(
                f"reference {reference.name!r} is a {reference.schema_type} schema, not PROTOBUF"
            )
        descriptor = decode_descriptor(reference.text)
        if descriptor is None:
            compiled = compile_accepting_undefined(reference.name, reference.text, self.sources)
            self.sources[reference.name] = compiled.source
            self.files[reference.name] = compiled.file
            return
        descriptor.name = reference.name
        files = self.ordered(descriptor)
        self.sources[reference.name] = printed(descriptor, build_pool(files))
        self.files[reference.name] = descriptor

    def free_name(self) -> str:
        """A file name for the schema itself that no reference uses."""
        name, n = f"{DEFAULT_NAME}.proto", 0
        while name in self.files:
            n += 1
            name = f"{DEFAULT_NAME}_{n}.proto"
        return name

    def compile(self, text: str) -> CompiledSchema:
        """A ``.proto`` schema's file, after its imports, and its custom options that no import defines."""
        compiled = compile_accepting_undefined(self.free_name(), text, self.sources)
        return CompiledSchema(self.ordered(compiled.file), compiled.undefined)

    def ordered(self, file: FileProto) -> list[FileProto]:
        """``file`` after its imports, each import after its own (depth first, in import order)."""
        ordered: list[FileProto] = []
        done: set[str] = set()

        def visit(current: FileProto, chain: tuple[str, ...]) -> None:
            for name in current.dependency:
                if name in done:
                    continue
                if name in chain:
                    raise InvalidSchema(f"import cycle: {' -> '.join((*chain, name))}")
                imported = self._lookup(current.name, name)
                visit(imported, (*chain, name))
                done.add(name)
                ordered.append(imported)

        visit(file, (file.name,))
        return [*ordered, file]

    def _lookup(self, importer: str, name: str) -> FileProto:
        if name in self.files:
            return self.files[name]
        builtin = builtin_descriptor(name)
        if builtin is not None:
            return builtin
        raise InvalidSchema(f'{importer}: import "{name}" is neither a reference nor a built-in')
