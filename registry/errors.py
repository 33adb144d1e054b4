"""The schema registry's error model: Confluent's ``Errors.java`` codes, one class per failure.

Every error carries ``code`` (Confluent's ``error_code``) and ``status`` (the HTTP status). The status is
``code // 100`` for the 5-digit codes; an incompatible schema is HTTP 409 with ``error_code`` 409, as
Confluent answered until 8.0 and Karapace answers (clients key on the status). The HTTP body is
``{"error_code": code, "message": message}``, built in one place (the registry's routes).

These codes collide with Strata's own (``storage.errors``: 40401 is "topic not found" there), which is why
the registry has a model of its own and never raises a ``StrataError``.
"""

from __future__ import annotations


class RegistryError(Exception):
    """A failure the registry answers with ``{"error_code": code, "message": ...}``."""

    code = 50001
    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SubjectNotFound(RegistryError):
    code, status = 40401, 404


class VersionNotFound(RegistryError):
    code, status = 40402, 404


class SchemaNotFound(RegistryError):
    code, status = 40403, 404


class SubjectSoftDeleted(RegistryError):
    code, status = 40404, 404


class SubjectNotSoftDeleted(RegistryError):
    code, status = 40405, 404


class VersionSoftDeleted(RegistryError):
    code, status = 40406, 404


class VersionNotSoftDeleted(RegistryError):
    code, status = 40407, 404


class SubjectLevelCompatibilityNotConfigured(RegistryError):
    code, status = 40408, 404


class SubjectLevelModeNotConfigured(RegistryError):
    code, status = 40409, 404


class IncompatibleSchema(RegistryError):
    code, status = 409, 409


class InvalidSchema(RegistryError):
    """The schema does not parse, a reference does not resolve, or the type is unknown."""

    code, status = 42201, 422


class InvalidVersion(RegistryError):
    code, status = 42202, 422


class InvalidCompatibilityLevel(RegistryError):
    code, status = 42203, 422


class InvalidMode(RegistryError):
    code, status = 42204, 422


class OperationNotPermitted(RegistryError):
    code, status = 42205, 422


class ReferenceExists(RegistryError):
    code, status = 42206, 422


class InvalidSubject(RegistryError):
    code, status = 42208, 422


class SchemaTooLarge(RegistryError):
    code, status = 42209, 422


class StoreError(RegistryError):
    code, status = 50001, 500
