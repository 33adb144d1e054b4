"""The Protobuf schema format (``PROTOBUF``): ``.proto`` text or a base64 ``FileDescriptorProto`` in, a
``ProtobufSchema`` out, and Confluent's compatibility rules between two of them.

The pieces, one concept each:
- ``protobuf_resolve``: references and built-in imports resolved into descriptors (``protobuf_compile``
  runs protoc in-process; ``protobuf_builtins`` says where ``google/*`` and ``confluent/*`` come from;
  ``protobuf_undefined`` keeps custom options that no import defines out of protoc's way, and beside the
  descriptor);
- ``protobuf_print``: a descriptor printed as ``.proto`` text (a schema registered as a descriptor is
  answered as text; the canonical form is printed too), after ``protobuf_normalize``;
- ``protobuf_wire``: Confluent's message indexes, and the names they address;
- ``protobuf_payload``: payloads decoded, and JSON to and from messages;
- ``protobuf_compat``: Confluent's ``SchemaDiff`` over descriptors.

Everything is sans IO, but for protoc's scratch files in a temporary directory during one ``parse``.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from google.protobuf import descriptor_pb2, descriptor_pool

from registry.errors import InvalidSchema
from registry.formats import protobuf_compat
from registry.formats.base import ParsedSchema, Resolved, SchemaType
from registry.formats.protobuf_normalize import normalize
from registry.formats.protobuf_option_scan import UndefinedOption
from registry.formats.protobuf_resolve import Resolver, build_pool, decode_descriptor, printed
from registry.formats.protobuf_wire import message_indexes, message_name, walk_messages

FileProto = descriptor_pb2.FileDescriptorProto


class ProtobufSchema:
    """A parsed Protobuf schema: its own file (``file``) and every file it imports (``files``, imports
    first), all built into ``pool``; beside them, its own file's custom options that no import defines
    (``undefined_options``), which are in its text and canonical text but in no descriptor."""

    __slots__ = ("_canonical", "_files", "_pool", "_text", "_undefined")

    def __init__(
        self,
        files: Sequence[FileProto],
        text: str,
        pool: descriptor_pool.DescriptorPool,
        canonical: str,
        undefined: Sequence[UndefinedOption] = (),
    ) -> None:
        self._files = tuple(files)
        self._text = text
        self._pool = pool
        self._canonical = canonical
        self._undefined = tuple(undefined)

    @property
    def schema_type(self) -> SchemaType:
        return SchemaType.PROTOBUF

    @property
    def text(self) -> str:
        """The ``.proto`` text as registered, or printed from the descriptor that was registered."""
        return self._text

    @property
    def file(self) -> FileProto:
        return self._files[-1]

    @property
    def files(self) -> tuple[FileProto, ...]:
        return self._files

    @property
    def pool(self) -> descriptor_pool.DescriptorPool:
        return self._pool

    @property
    def undefined_options(self) -> tuple[UndefinedOption, ...]:
        return self._undefined

    def canonical(self) -> str:
        return self._canonical

    def serialized(self) -> str:
        """The schema's own ``FileDescriptorProto``, base64 (``format=serialized``, which confluent-kafka's
        deserializer reads). Custom options that no import defines are not in it: a descriptor holds an
        option by its field number, which only a definition gives (Confluent's holds none either)."""
        return base64.b64encode(self.file.SerializeToString(deterministic=True)).decode("ascii")

    def record_names(self) -> list[str]:
        return [name for name, _indexes in walk_messages(self.file)]

    def message_name(self, indexes: Sequence[int]) -> str:
        """The full name of the message that message ``indexes`` address (``InvalidPayload`` if none)."""
        return message_name(self.file, indexes)

    def message_indexes(self, full_name: str) -> list[int]:
        return message_indexes(self.file, full_name)

    def __repr__(self) -> str:
        return f"ProtobufSchema({self.file.name!r}, package={self.file.package!r})"


class ProtobufFormat:
    @property
    def schema_type(self) -> SchemaType:
        return SchemaType.PROTOBUF

    def parse(self, text: str, references: Sequence[Resolved]) -> ProtobufSchema:
        if not text.strip():
            raise InvalidSchema("empty schema")
        resolver = Resolver(references)
        descriptor = decode_descriptor(text)
        undefined: tuple[UndefinedOption, ...] = ()
        if descriptor is None:
            compiled = resolver.compile(text)
            files, undefined = compiled.files, compiled.undefined
        else:
            if not descriptor.name or descriptor.name in resolver.files:
                descriptor.name = resolver.free_name()
            files = resolver.ordered(descriptor)
        pool = build_pool(files)
        own = files[-1]
        registered = text if descriptor is None else printed(own, pool)
        canonical = printed(normalize(own), pool, normalized=True, undefined=undefined)
        return ProtobufSchema(files, registered, pool, canonical, undefined)

    def compatibility(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        if not isinstance(reader, ProtobufSchema) or not isinstance(writer, ProtobufSchema):
            return [
                f"Incompatible because of different schema types: {writer.schema_type}, {reader.schema_type}"
            ]
        return protobuf_compat.incompatibilities(reader.files, writer.files)


FORMAT = ProtobufFormat()
