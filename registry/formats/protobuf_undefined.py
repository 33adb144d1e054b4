"""Custom options that no import defines: accepted as Confluent's registry accepts them, kept beside the
descriptor rather than in it.

``option (my_option) = true;`` where no file the schema imports declares ``my_option`` is an error to
protoc (``Option "(my_option)" unknown``), which Strata compiles ``.proto`` text with. Confluent's registry
parses text with Square's wire-schema parser, which does not resolve options, so it takes such a schema
(Karapace too; its tests register one). What Confluent does with the option
(confluentinc/schema-registry, protobuf-provider, ``ProtobufSchema`` and ``ProtobufSchemaUtils``):
- the schema's text, and its canonical string (what a schema's identity is compared by), print every
  option of the parsed file, so the undefined one too, by the name it was written with; normalization
  sorts an element's options by name, a name that does not resolve keeping its spelling;
- its descriptor (``toDescriptor``, built by ``toDynamicSchema``), which the ``serialized`` format and the
  clients' serializers use, holds standard options and Confluent's own ``confluent.*`` meta options only,
  so never an undefined one;
- its compatibility rules compare types, fields and names, never custom options.

Strata does the same, with protoc as the one judge of what is defined:
- protoc compiles the text as it is; if it refuses options as unknown in the schema's own file, those
  assignments (``protobuf_option_scan`` finds them by the positions protoc reports) are taken out of the
  text, spaces in their place, and protoc runs again, until it accepts the text or refuses it for another
  reason. protoc reports at most one unknown option per options message per run, hence the runs; each
  removes at least one assignment, so they end. An option that an import does define is never taken out,
  so it works as before, and so does every other error (an option defined for another element, a field an
  option does not have): those are defined options misused, and stay refused.
- the assignments taken out are kept with the schema (``UndefinedOption``): the registered text keeps
  them as written, the canonical text prints them at their elements after the defined ones (by name when
  normalized, as Confluent), so that one schema gets one fingerprint and one id, and a schema differing
  only in such an option is another schema, as in Confluent;
- the descriptor is protoc's of the text without them: ``format=serialized``, the descriptor pool that
  payloads are decoded with, and the compatibility checks see no undefined option, as in Confluent.

A reference's text goes through the same steps; what the importers compile against is its text without
the undefined options.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from google.protobuf import descriptor_pb2

from registry.formats.protobuf_compile import ProtocError, ProtocRefused, compile_proto
from registry.formats.protobuf_option_scan import Scan, ScanError, UndefinedOption

FileProto = descriptor_pb2.FileDescriptorProto

# protoc's message for a custom option whose name resolves to nothing (descriptor.cc, OptionInterpreter).
_UNKNOWN = re.compile(r'^Option "(\([^"]*\))" unknown\.')


@dataclass(frozen=True, slots=True)
class Compiled:
    """A ``.proto`` text compiled: its descriptor, the text protoc accepted (the text itself, or it without
    the undefined options) and those options."""

    file: FileProto
    source: str
    undefined: tuple[UndefinedOption, ...]


def compile_accepting_undefined(name: str, text: str, imports: Mapping[str, str]) -> Compiled:
    """Compile ``text`` as the file ``name`` among ``imports`` (texts by import path), its undefined
    custom options taken out (the module docstring). ``InvalidSchema`` (``ProtocRefused``) for any other
    error, with protoc's errors of the last run."""
    scan: Scan | None = None
    removed: set[int] = set()
    source = text
    while True:
        try:
            file = compile_proto(name, {**imports, name: source})
        except ProtocRefused as refused:
            unknown = [e for e in refused.errors if e.filename == name and _UNKNOWN.match(e.message)]
            if not unknown:
                raise
            if scan is None:
                try:
                    scan = Scan(text)
                except ScanError:
                    raise refused from None
            found = _sites(scan, unknown, removed)
            if found is None or found <= removed:
                raise
            removed |= found
            source = scan.removal(removed)
            continue
        undefined = tuple(o for i in sorted(removed) for o in scan.sites[i].options) if scan else ()
        return Compiled(file, source, undefined)


def _sites(scan: Scan, errors: list[ProtocError], removed: set[int]) -> set[int] | None:
    """The sites protoc's unknown-option errors point at; None if one points at no site. protoc gives
    some such errors no position (a second extension range of one ``extensions`` statement): those are
    left to the next run while another error points somewhere, else matched by name if one site that is
    still in the text has it."""
    by_position = {site.at: index for index, site in enumerate(scan.sites)}
    found = set()
    unplaced = []
    for error in errors:
        if error.line < 0:
            unplaced.append(error)
            continue
        index = by_position.get((error.line, error.column))
        if index is None:
            return None
        found.add(index)
    if found or not unplaced:
        return found
    named = _UNKNOWN.match(unplaced[0].message)
    assert named is not None  # errors were chosen by this pattern
    candidates = [
        index
        for index, site in enumerate(scan.sites)
        if index not in removed and site.options and site.options[0].name.startswith(named.group(1))
    ]
    return set(candidates) if len(candidates) == 1 else None
