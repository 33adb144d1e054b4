"""The imports a Protobuf schema may use without a reference: ``google/protobuf/*``, ``google/type/*`` and
``confluent/*``.

confluent-kafka's serializers never register these as references (its ``_is_builtin``), and Confluent's
registry knows them, so Strata must too. Their source comes from the packages that own them:
- ``google/protobuf/*`` from grpcio-tools (``grpc_tools/_proto``), the files its protoc was built with;
- ``google/type/*`` from googleapis-common-protos, which installs its ``.proto`` files beside its modules;
- ``confluent/*`` (``meta.proto``, ``type/decimal.proto``, ``type/variant.proto`` and the legacy
  ``types/decimal.proto``) from ``protobuf_builtins/`` here: confluent-kafka ships these only as generated
  modules (in its registry extra, not a runtime dependency), so the files were printed from those modules'
  descriptors, and a test keeps them equal.

A reference of the same name wins over a built-in: the schema said which file it means.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path

PREFIXES = ("google/protobuf/", "google/type/", "confluent/")
SHIPPED = Path(__file__).with_name("protobuf_builtins")


def is_builtin(name: str) -> bool:
    return name.startswith(PREFIXES)


@cache
def include_roots() -> tuple[Path, ...]:
    """protoc include directories holding ``google/protobuf/*`` and ``confluent/*`` (and nothing else)."""
    spec = importlib.util.find_spec("grpc_tools")
    assert spec is not None, "grpcio-tools is a dependency"
    assert spec.submodule_search_locations, "grpc_tools is a package"
    return (Path(next(iter(spec.submodule_search_locations))) / "_proto", SHIPPED)


@cache
def google_type_files() -> dict[str, Path]:
    """``google/type/*.proto`` by import path. Their directory is a namespace package inside
    site-packages, which cannot be an include root (every other package's files would become
    importable), so the compiler copies these into its own tree."""
    spec = importlib.util.find_spec("google.type")
    if spec is None or not spec.submodule_search_locations:
        return {}
    found: dict[str, Path] = {}
    for location in spec.submodule_search_locations:
        for path in sorted(Path(location).glob("*.proto")):
            found.setdefault(f"google/type/{path.name}", path)
    return found


def exists(name: str) -> bool:
    if not is_builtin(name):
        return False
    if name.startswith("google/type/"):
        return name in google_type_files()
    return any((root / name).is_file() for root in include_roots())
