"""The controller's mirror batch: the `Resource` rows kept current with what the cluster has (never the phase).

The controller writes what its watches and re-lists saw with `resource_mirror_write` (many objects, and the uids
found deleted, in one transaction; `resource_mirror_upsert` for one): on PostgreSQL the objects are one
statement, `INSERT … SELECT … FROM jsonb_populate_recordset(<the rows>) ON CONFLICT (uid) DO UPDATE SET <the
mirror's columns> WHERE <the incoming resourceVersion is strictly newer>`, rows in uid order (two writers lock in
the same order: no deadlock), so an echo (a version the mirror has) changes nothing and costs no lock wait in
Python. Elsewhere the rows are locked in one query (`resources_locked`, which the locked record and the deletions
use too), the missing ones created, the changed ones updated in one `executemany`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from contextlib import nullcontext
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine.recording_rows import MIRROR_FIELDS, ObservedObject, mirror_observed, new_resource
from reconcilers.engine.sqljson import execute, json_row, jsonb, table
from reconcilers.models import Resource


def resource_mirror_upsert(kind: ResourceKind, obj: dict, cluster: str = DEFAULT_CLUSTER) -> None:
    """Create or refresh the mirror of a live object of `cluster` (as the API returned it): metadata, spec,
    status, generation, labels, owner. Never the phase, its reason or the chain head (the recording owns those).
    An object not newer than the mirror (numeric resourceVersion at or below the recorded one) changes nothing."""
    resource_mirror_write([(kind, obj)], cluster=cluster)


def resource_mirror_write(objects: list[tuple[ResourceKind, dict]], deleted: Sequence[str] = (), *,
                          cluster: str = DEFAULT_CLUSTER) -> None:
    """`resource_mirror_upsert` for many objects of `cluster` and `resource_mirror_mark_deleted` for the
    `deleted` uids, in one transaction. On PostgreSQL the objects are one upsert statement (`mirror_upsert`);
    elsewhere the existing rows are locked in one query (in uid order, so two writers never deadlock), the missing
    ones created, the changed ones updated. Each uid is written at most once (its last object)."""
    latest = {o.uid: o for o in (ObservedObject.from_api(kind, obj, cluster) for kind, obj in objects)}
    if connection.vendor == "postgresql":  # one statement (mirror_upsert): no lock taken in Python
        with transaction.atomic() if deleted else nullcontext():
            mirror_upsert(latest, timezone.now())
            for uid in deleted:
                resource_mirror_mark_deleted(uid)
        return
    with transaction.atomic():
        if latest:
            rows = resources_locked(latest)
            now = timezone.now()
            changed = [rows[uid] for uid, o in latest.items() if mirror_observed(rows[uid], o, now, strictly=True)]
            for row in changed:
                row.updated_at = now
            _resources_update(changed, MIRROR_FIELDS)
        for uid in deleted:
            resource_mirror_mark_deleted(uid)


def _resources_update(rows: list[Resource], names: list[str]) -> None:
    """UPDATE these fields of these (locked) rows: one statement sent for all rows (`executemany`), each value
    adapted by its field as `save()` would. Django's `bulk_update` builds a CASE per field and row instead,
    which costs the controller more CPU than the rest of its work."""
    if not rows:
        return
    connection = transaction.get_connection()
    fields = [Resource._meta.get_field(name) for name in names]
    pk = Resource._meta.pk
    qn = connection.ops.quote_name
    sql = (f"UPDATE {qn(Resource._meta.db_table)} SET {', '.join(f'{qn(f.column)} = %s' for f in fields)} "
           f"WHERE {qn(pk.column)} = %s")
    params = [[f.get_db_prep_save(getattr(row, f.attname), connection) for f in fields]
              + [pk.get_db_prep_save(row.pk, connection)] for row in rows]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def resources_locked(objects: dict[str, ObservedObject]) -> dict[str, Resource]:
    """The Resource rows of these uids, locked for this transaction; the missing ones created first."""
    def lock(uids: list[str]) -> dict[str, Resource]:
        return {r.uid: r for r in Resource.objects.select_for_update().filter(uid__in=uids).order_by("uid")}

    rows = lock(sorted(objects))
    missing = sorted(set(objects) - set(rows))
    if missing:  # created, or found created concurrently (that transaction has committed: its row is there)
        Resource.objects.bulk_create(
            [new_resource(o.kind, uid, o.namespace, o.name, o.cluster)
             for uid, o in objects.items() if uid in missing],
            ignore_conflicts=True,
        )
        rows.update(lock(missing))
    return rows


def resource_mirror_mark_deleted(uid: str) -> None:
    """Mark the mirror of an object that is gone from the API as deleted (once; a no-op when unknown)."""
    now = timezone.now()
    Resource.objects.filter(uid=uid, deleted=False).update(deleted=True, deleted_at=now, updated_at=now)


def mirror_upsert(objects: dict[str, ObservedObject], now: datetime) -> None:
    """Create or refresh the mirror rows of these objects (by uid) in one statement (see `resource_mirror_write`)."""
    if not objects:
        return
    rows = []
    for uid in sorted(objects):
        o = objects[uid]
        row = new_resource(o.kind, uid, o.namespace, o.name, o.cluster)
        mirror_observed(row, o, now)
        row.deleted, row.deleted_at = False, None  # the mirror batch never marks deleted (see resource_mirror_write)
        row.created_at = row.updated_at = now
        rows.append(json_row(row))
    execute(_upsert_sql(), [jsonb(rows)])


@functools.cache
def _upsert_sql() -> str:
    """`INSERT … FROM jsonb_populate_recordset(<the rows>) ON CONFLICT (uid) DO UPDATE SET <the mirror's columns>
    WHERE <the incoming resourceVersion is strictly newer>`, rows in uid order."""
    qn = connection.ops.quote_name
    meta = Resource._meta
    columns = ", ".join(qn(f.column) for f in meta.concrete_fields if not f.primary_key)
    rv = qn(meta.get_field("resource_version").column)
    sets = ", ".join(f"{qn(meta.get_field(name).column)} = EXCLUDED.{qn(meta.get_field(name).column)}"
                     for name in MIRROR_FIELDS)
    newer = (f"r.{rv} = '' OR r.{rv} !~ '^[0-9]{{1,30}}$' OR EXCLUDED.{rv} !~ '^[0-9]{{1,30}}$' "
             f"OR EXCLUDED.{rv}::numeric > r.{rv}::numeric")
    return (f"INSERT INTO {table(Resource)} AS r ({columns}) SELECT {columns} "
            f"FROM jsonb_populate_recordset(NULL::{table(Resource)}, %s::jsonb) ORDER BY {qn('uid')} "
            f"ON CONFLICT ({qn('uid')}) DO UPDATE SET {sets} WHERE {newer}")
