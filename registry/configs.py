"""The registry's config and mode operations, global (``subject=None``) and per subject, with Confluent's
answers: a subject without a level of its own is 40408 unless ``default_to_global``; without a mode of its
own, 40409 likewise; a read-only mode refuses config changes (42205) but never a mode change, which is how
a read-only registry is opened again.

Entering IMPORT (from any other mode) is refused while the scope has a live version, unless ``force``: the
check runs in the store's transaction, under the locks a registration takes, so no registration slips in
between the check and the change.
"""

from __future__ import annotations

from registry.errors import (
    OperationNotPermitted,
    SubjectLevelCompatibilityNotConfigured,
    SubjectLevelModeNotConfigured,
)
from registry.levels import DEFAULT_LEVEL, effective_level, parse_level, stored_level
from registry.modes import DEFAULT_MODE, Mode, effective_mode, parse_mode, require_writable, stored_mode
from registry.names import validate_subject
from registry.views import ConfigView
from storage.metadata.schema_store import SchemaStore


class Configs:
    def __init__(self, store: SchemaStore) -> None:
        self._store = store

    def _checked(self, subject: str | None) -> str | None:
        return None if subject is None else validate_subject(subject)

    def effective_mode(self, subject: str | None) -> Mode:
        own = None if subject is None else self._store.subject_mode(subject)
        return effective_mode(own, self._store.subject_mode(None))

    # --- compatibility config --------------------------------------------------------------------------
    def config(self, subject: str | None = None, default_to_global: bool = False) -> ConfigView:
        row = self._store.subject_config(self._checked(subject))
        level = stored_level(row)
        if level is None and subject is not None:
            if not default_to_global:
                raise SubjectLevelCompatibilityNotConfigured(
                    f"Subject '{subject}' does not have subject-level compatibility configured"
                )
            return self._global_config()
        return ConfigView(level or DEFAULT_LEVEL, None if row is None else row.normalize)

    def _global_config(self) -> ConfigView:
        row = self._store.subject_config(None)
        return ConfigView(effective_level(None, row), None if row is None else row.normalize)

    def set_config(
        self, subject: str | None, compatibility: str | None, normalize: bool | None = None
    ) -> ConfigView:
        """Set the level and/or normalize (what is not given stays). Raises InvalidCompatibilityLevel,
        OperationNotPermitted in a read-only mode."""
        level = None if compatibility is None else parse_level(compatibility)
        require_writable(subject or "(global)", self.effective_mode(self._checked(subject)))
        row = self._store.set_subject_config(subject, None if level is None else level.value, normalize)
        return ConfigView(stored_level(row) or DEFAULT_LEVEL, row.normalize)

    def delete_config(self, subject: str | None) -> ConfigView:
        """Forget the subject's (or the global) config; answers the config now in effect for it, as
        Karapace does (Confluent answers the one deleted)."""
        require_writable(subject or "(global)", self.effective_mode(self._checked(subject)))
        self._store.delete_subject_config(subject)
        return self._global_config()

    # --- mode ------------------------------------------------------------------------------------------
    def mode(self, subject: str | None = None, default_to_global: bool = False) -> Mode:
        if subject is None:
            return stored_mode(self._store.subject_mode(None)) or DEFAULT_MODE
        own = stored_mode(self._store.subject_mode(validate_subject(subject)))
        global_ = self._store.subject_mode(None)
        if stored_mode(global_) is Mode.READONLY_OVERRIDE or own is not None:
            return effective_mode(None if own is None else own.value, global_)
        if not default_to_global:
            raise SubjectLevelModeNotConfigured(
                f"Subject '{subject}' does not have subject-level mode configured"
            )
        return effective_mode(None, global_)

    def set_mode(self, subject: str | None, mode: str, force: bool = False) -> Mode:
        """Raises InvalidMode, and OperationNotPermitted when entering IMPORT where a live version exists
        (unless ``force``)."""
        target = parse_mode(mode)
        scope = self._checked(subject)
        global_now = None if scope is None else self._store.subject_mode(None)

        def check(current: str | None, live: bool) -> None:
            now = effective_mode(current, global_now) if scope is not None else stored_mode(current)
            if target is Mode.IMPORT and now is not Mode.IMPORT and live and not force:
                raise OperationNotPermitted("Cannot import since found existing subjects")

        self._store.set_subject_mode(scope, target.value, check)
        return target

    def delete_mode(self, subject: str | None) -> Mode:
        """Forget the subject's (or the global) mode; answers the mode deleted. A subject without one:
        SubjectLevelModeNotConfigured (40409)."""
        previous = stored_mode(self._store.delete_subject_mode(self._checked(subject)))
        if previous is None:
            if subject is not None:
                raise SubjectLevelModeNotConfigured(
                    f"Subject '{subject}' does not have subject-level mode configured"
                )
            return DEFAULT_MODE
        return previous
