"""The error table: every error type has a kind, a code and a retriability; codes are unique; the HTTP
mapping covers every kind and keeps Confluent's numbering (status = code // 100, unavailable 5xx = 503)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import storage.errors as errors
from api.errors import KIND_STATUS, error_response, http_status
from storage.errors import Conflict, ErrorKind, StrataError, Unavailable


def all_error_types() -> list[type[StrataError]]:
    """Every subclass of StrataError in the project: import every module first, so that none is missed."""
    for package in ("storage", "agents", "planner", "pipeline", "api"):
        path = importlib.import_module(package).__path__
        for module in pkgutil.walk_packages(path, package + "."):
            importlib.import_module(module.name)
    found: list[type[StrataError]] = []
    pending: list[type[StrataError]] = [StrataError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return sorted(set(found), key=lambda c: c.__name__)


ERROR_TYPES = all_error_types()


def test_every_error_type_lives_in_storage_errors() -> None:
    declared = {c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, StrataError)}
    outside = [f"{c.__module__}.{c.__name__}" for c in ERROR_TYPES if c not in declared]
    assert outside == []
    assert len(ERROR_TYPES) >= 25


@pytest.mark.parametrize("cls", ERROR_TYPES, ids=lambda c: c.__name__)
def test_error_type_has_kind_code_and_retriable(cls: type[StrataError]) -> None:
    assert isinstance(cls.kind, ErrorKind)
    assert isinstance(cls.code, int)
    assert 40000 <= cls.code < 60000
    assert isinstance(cls.retriable, bool)
    if "code" not in vars(cls):
        # Inherits its code: it must be a refinement of its parent, answered exactly like it.
        (parent,) = cls.__bases__
        assert issubclass(parent, StrataError)
        assert (cls.kind, cls.retriable) == (parent.kind, parent.retriable), cls


def test_codes_are_unique() -> None:
    owners: dict[int, str] = {}
    for cls in ERROR_TYPES:
        if "code" in vars(cls):
            assert cls.code not in owners, f"{cls.__name__} reuses {cls.code} of {owners.get(cls.code)}"
            owners[cls.code] = cls.__name__


def test_kind_bases_agree_with_kinds() -> None:
    for cls in ERROR_TYPES:
        assert (cls.kind is ErrorKind.CONFLICT) == issubclass(cls, Conflict), cls
        if issubclass(cls, Unavailable):
            assert cls.kind is ErrorKind.UNAVAILABLE, cls
            assert cls.retriable, cls
    # "Lost a race" is not "infrastructure down": no conflict is caught by ``except Unavailable``.
    assert not issubclass(errors.CommitConflict, Unavailable)


# Which statuses a kind may be answered with: clients must be able to tell the kinds apart by status class.
ALLOWED_STATUS = {
    ErrorKind.INVALID: {400, 401, 403, 406, 408, 413, 416, 422},
    ErrorKind.NOT_FOUND: {404},
    ErrorKind.CONFLICT: {400, 409},
    ErrorKind.UNAVAILABLE: {429, 503},
    ErrorKind.CORRUPT: {500},
    ErrorKind.INTERNAL: {500},
}


def test_http_mapping_is_total_and_keeps_the_numbering() -> None:
    assert set(KIND_STATUS) == set(ErrorKind)
    for cls in ERROR_TYPES:
        status = http_status(make(cls))
        assert status in ALLOWED_STATUS[cls.kind], (cls, status)
        expected = 503 if cls.kind is ErrorKind.UNAVAILABLE and cls.code >= 50000 else cls.code // 100
        assert status == expected, cls


def make(cls: type[StrataError]) -> StrataError:
    if cls is errors.IdempotencyConflict:
        return errors.IdempotencyConflict({"k": [(0, 1)]})
    if cls is errors.ProducerConflict:
        return errors.ProducerConflict({0: 5}, {1: errors.OutOfOrderSequence("gap")})
    if cls is errors.OffsetMapFull:
        return errors.OffsetMapFull(3, 3)
    return cls("message")


@pytest.mark.parametrize(
    ("cls", "status", "retry_after"),
    [
        (errors.Unavailable, 503, True),
        (errors.TransientStoreError, 503, True),
        (errors.CommitConflict, 409, True),
        (errors.ClaimRefused, 409, True),
        (errors.LeaseLost, 409, False),
        (errors.BufferFull, 429, True),
        (errors.TopicExists, 400, False),
        (errors.UnknownTopic, 404, False),
        (errors.CodecError, 500, False),
        (errors.StrataError, 500, False),
    ],
)
def test_error_response(cls: type[StrataError], status: int, retry_after: bool) -> None:
    response = error_response(make(cls))
    assert response.status_code == status
    assert ("retry-after" in response.headers) == retry_after
    assert response.body.startswith(b'{"error_code":' + str(cls.code).encode())
