"""Append-only models: rows are inserted, never updated or deleted through the ORM.

`Transition` and `ReconcileRun` are the audit record (docs/architecture.md, the record). Their model and queryset refuse
`save()` on an existing row, `delete()`, `update()`, `bulk_update()`, upserts and deletes, so no code path in
the product can rewrite history by accident. On PostgreSQL a trigger refuses UPDATE and DELETE as well
(migration 0002), which also covers raw SQL; `manage.py audit_verify` detects what a DBA does anyway.
"""

from __future__ import annotations

from typing import Any

from django.db import models


class AppendOnlyError(RuntimeError):
    """An update or delete of an append-only row was attempted."""


def _refuse(model: type[models.Model] | models.Model, action: str) -> AppendOnlyError:
    name = model._meta.label
    return AppendOnlyError(f"{name} is append-only: {action} is refused")


class AppendOnlyQuerySet(models.QuerySet):
    """A queryset that can insert and read, and refuses every bulk update or delete."""

    def update(self, **kwargs: Any) -> int:
        """Refused: append-only rows are never changed."""
        raise _refuse(self.model, "update()")

    def _update(self, values: Any) -> int:
        raise _refuse(self.model, "update()")

    def bulk_update(self, objs: Any, fields: Any, batch_size: int | None = None) -> int:
        """Refused: append-only rows are never changed."""
        raise _refuse(self.model, "bulk_update()")

    def update_or_create(self, defaults: Any = None, create_defaults: Any = None, **kwargs: Any) -> Any:
        """Refused: it would update an existing row."""
        raise _refuse(self.model, "update_or_create()")

    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> list[Any]:
        """Insert many rows; upserts (update_conflicts) are refused."""
        if kwargs.get("update_conflicts") or (len(args) >= 3 and args[2]):
            raise _refuse(self.model, "bulk_create(update_conflicts=True)")
        return super().bulk_create(objs, *args, **kwargs)

    def delete(self) -> tuple[int, dict[str, int]]:
        """Refused: append-only rows are never deleted."""
        raise _refuse(self.model, "delete()")

    delete.alters_data = True  # type: ignore[attr-defined]

    def _raw_delete(self, using: Any) -> int:
        raise _refuse(self.model, "delete()")


AppendOnlyManager = models.Manager.from_queryset(AppendOnlyQuerySet)


class AppendOnlyModel(models.Model):
    """Abstract base of the append-only audit tables.

    Concrete subclasses set `base_manager_name = "objects"` in their Meta, so related-object access and
    Django's deletion collector go through the refusing queryset too.
    """

    objects = AppendOnlyManager()

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Insert the row; saving a row that is already stored is refused."""
        if not self._state.adding or kwargs.get("force_update") or kwargs.get("update_fields"):
            raise _refuse(self, "save() of a stored row")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        """Refused: append-only rows are never deleted."""
        raise _refuse(self, "delete()")
