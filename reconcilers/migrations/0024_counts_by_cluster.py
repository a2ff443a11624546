"""Issue 41: the maintained counts (`reconcilers.models.aggregates`, migration 0015) gain the cluster, so the
console's overview counts per cluster (and for one picked cluster) without scanning the mirror: resources per
(cluster, kind, group, namespace, phase, deleted) and transitions per hour bucket and (cluster, kind, namespace,
from, to).

The triggers are replaced by ones that write the row's cluster (and the mirror's moved trigger also fires when a
row's cluster changes), and the totals are recounted from the rows in the same migration (the deltas emptied):
whatever cluster the rows were recorded in, the counts start equal to a recount.
"""

from datetime import UTC
from importlib import import_module

from django.db import migrations, models
from django.db.models import Count
from django.db.models.functions import TruncHour

RESOURCE_KEY = 'cluster, kind, "group", namespace, phase, deleted'
TRANSITION_KEY = "bucket, cluster, kind, namespace, from_phase, to_phase"
_OLD = "OLD.cluster, OLD.kind, OLD.\"group\", OLD.namespace, OLD.phase, OLD.deleted"
_NEW = "NEW.cluster, NEW.kind, NEW.\"group\", NEW.namespace, NEW.phase, NEW.deleted"

POSTGRESQL = [
    "DROP TRIGGER IF EXISTS reconcilers_resource_count_moved ON reconcilers_resource;",
    f"""
    CREATE OR REPLACE FUNCTION reconcilers_count_resource() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO reconcilers_resourcecountdelta ({RESOURCE_KEY}, n) VALUES ({_NEW}, 1);
        ELSIF TG_OP = 'DELETE' THEN
            INSERT INTO reconcilers_resourcecountdelta ({RESOURCE_KEY}, n) VALUES ({_OLD}, -1);
        ELSE
            INSERT INTO reconcilers_resourcecountdelta ({RESOURCE_KEY}, n) VALUES ({_OLD}, -1), ({_NEW}, 1);
        END IF;
        RETURN NULL;
    END $$;
    """,
    'CREATE TRIGGER reconcilers_resource_count_moved AFTER UPDATE OF cluster, kind, "group", namespace, phase, '
    "deleted ON reconcilers_resource FOR EACH ROW WHEN (OLD.phase IS DISTINCT FROM NEW.phase "
    "OR OLD.deleted IS DISTINCT FROM NEW.deleted OR OLD.namespace IS DISTINCT FROM NEW.namespace "
    'OR OLD.kind IS DISTINCT FROM NEW.kind OR OLD."group" IS DISTINCT FROM NEW."group" '
    "OR OLD.cluster IS DISTINCT FROM NEW.cluster) "
    "EXECUTE FUNCTION reconcilers_count_resource();",
    f"""
    CREATE OR REPLACE FUNCTION reconcilers_count_transition() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO reconcilers_transitioncountdelta ({TRANSITION_KEY}, n)
        VALUES (date_trunc('hour', NEW.created_at, 'UTC'), NEW.cluster, NEW.kind, NEW.namespace, NEW.from_phase,
                NEW.to_phase, 1);
        RETURN NULL;
    END $$;
    """,
]
# 0015's functions, as they were (the reverse)
POSTGRESQL_REVERSE = [
    "DROP TRIGGER IF EXISTS reconcilers_resource_count_moved ON reconcilers_resource;",
    """
    CREATE OR REPLACE FUNCTION reconcilers_count_resource() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO reconcilers_resourcecountdelta (kind, "group", namespace, phase, deleted, n)
            VALUES (NEW.kind, NEW."group", NEW.namespace, NEW.phase, NEW.deleted, 1);
        ELSIF TG_OP = 'DELETE' THEN
            INSERT INTO reconcilers_resourcecountdelta (kind, "group", namespace, phase, deleted, n)
            VALUES (OLD.kind, OLD."group", OLD.namespace, OLD.phase, OLD.deleted, -1);
        ELSE
            INSERT INTO reconcilers_resourcecountdelta (kind, "group", namespace, phase, deleted, n)
            VALUES (OLD.kind, OLD."group", OLD.namespace, OLD.phase, OLD.deleted, -1),
                   (NEW.kind, NEW."group", NEW.namespace, NEW.phase, NEW.deleted, 1);
        END IF;
        RETURN NULL;
    END $$;
    """,
    'CREATE TRIGGER reconcilers_resource_count_moved AFTER UPDATE OF kind, "group", namespace, phase, deleted '
    "ON reconcilers_resource FOR EACH ROW WHEN (OLD.phase IS DISTINCT FROM NEW.phase "
    "OR OLD.deleted IS DISTINCT FROM NEW.deleted OR OLD.namespace IS DISTINCT FROM NEW.namespace "
    'OR OLD.kind IS DISTINCT FROM NEW.kind OR OLD."group" IS DISTINCT FROM NEW."group") '
    "EXECUTE FUNCTION reconcilers_count_resource();",
    """
    CREATE OR REPLACE FUNCTION reconcilers_count_transition() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO reconcilers_transitioncountdelta (bucket, kind, namespace, from_phase, to_phase, n)
        VALUES (date_trunc('hour', NEW.created_at, 'UTC'), NEW.kind, NEW.namespace, NEW.from_phase, NEW.to_phase, 1);
        RETURN NULL;
    END $$;
    """,
]
SQLITE = [
    "DROP TRIGGER IF EXISTS reconcilers_transition_count;",
    "DROP TRIGGER IF EXISTS reconcilers_resource_count_moved;",
    "DROP TRIGGER IF EXISTS reconcilers_resource_count;",
    f"""CREATE TRIGGER reconcilers_resource_count AFTER INSERT ON reconcilers_resource BEGIN
        INSERT INTO reconcilers_resourcecountdelta ({RESOURCE_KEY}, n) VALUES ({_NEW}, 1);
    END;""",
    f"""CREATE TRIGGER reconcilers_resource_count_moved AFTER UPDATE OF cluster, kind, "group", namespace, phase,
        deleted ON reconcilers_resource FOR EACH ROW WHEN OLD.phase IS NOT NEW.phase OR OLD.deleted IS NOT NEW.deleted
        OR OLD.namespace IS NOT NEW.namespace OR OLD.kind IS NOT NEW.kind OR OLD."group" IS NOT NEW."group"
        OR OLD.cluster IS NOT NEW.cluster BEGIN
        INSERT INTO reconcilers_resourcecountdelta ({RESOURCE_KEY}, n) VALUES ({_OLD}, -1), ({_NEW}, 1);
    END;""",
    f"""CREATE TRIGGER reconcilers_transition_count AFTER INSERT ON reconcilers_transition BEGIN
        INSERT INTO reconcilers_transitioncountdelta ({TRANSITION_KEY}, n)
        VALUES (strftime('%Y-%m-%d %H:00:00', NEW.created_at), NEW.cluster, NEW.kind, NEW.namespace,
                NEW.from_phase, NEW.to_phase, 1);
    END;""",
]


def _recount(apps, schema_editor) -> None:
    """The totals recounted from the rows, per cluster; the deltas emptied."""
    db = schema_editor.connection.alias
    resource, transition = apps.get_model("reconcilers", "Resource"), apps.get_model("reconcilers", "Transition")
    for name in ("ResourceCountDelta", "ResourceCount", "TransitionCountDelta", "TransitionCount"):
        apps.get_model("reconcilers", name).objects.using(db).all().delete()
    resource_count = apps.get_model("reconcilers", "ResourceCount")
    transition_count = apps.get_model("reconcilers", "TransitionCount")
    resource_count.objects.using(db).bulk_create(
        resource_count(n=row.pop("n"), **row) for row in resource.objects.using(db).order_by()
        .values("cluster", "kind", "group", "namespace", "phase", "deleted").annotate(n=Count("id")).iterator())
    transition_count.objects.using(db).bulk_create(
        (transition_count(n=row.pop("n"), **row) for row in transition.objects.using(db).order_by()
         .values("cluster", "kind", "namespace", "from_phase", "to_phase", bucket=TruncHour("created_at", tzinfo=UTC))
         .annotate(n=Count("id")).iterator()), batch_size=2000)


def install(apps, schema_editor):
    """The cluster-writing triggers, then the totals recounted (one transaction on PostgreSQL)."""
    for sql in {"postgresql": POSTGRESQL, "sqlite": SQLITE}.get(schema_editor.connection.vendor, []):
        schema_editor.execute(sql)
    _recount(apps, schema_editor)


def uninstall(apps, schema_editor):
    """0015's triggers back and the counts emptied (they are recounted by 0015's key once the cluster columns are
    gone: `old_key_recount`)."""
    vendor = schema_editor.connection.vendor
    statements = POSTGRESQL_REVERSE if vendor == "postgresql" else []
    if vendor == "sqlite":
        statements = SQLITE[:3] + import_module("reconcilers.migrations.0015_maintained_counts").SQLITE
    for sql in statements:
        schema_editor.execute(sql)
    for name in ("ResourceCountDelta", "ResourceCount", "TransitionCountDelta", "TransitionCount"):
        apps.get_model("reconcilers", name).objects.using(schema_editor.connection.alias).all().delete()


def old_key_recount(apps, schema_editor) -> None:
    """Reversing: the totals recounted by 0015's key (no cluster)."""
    db = schema_editor.connection.alias
    resource, transition = apps.get_model("reconcilers", "Resource"), apps.get_model("reconcilers", "Transition")
    resource_count = apps.get_model("reconcilers", "ResourceCount")
    transition_count = apps.get_model("reconcilers", "TransitionCount")
    resource_count.objects.using(db).bulk_create(
        resource_count(n=row.pop("n"), **row) for row in resource.objects.using(db).order_by()
        .values("kind", "group", "namespace", "phase", "deleted").annotate(n=Count("id")).iterator())
    transition_count.objects.using(db).bulk_create(
        (transition_count(n=row.pop("n"), **row) for row in transition.objects.using(db).order_by()
         .values("kind", "namespace", "from_phase", "to_phase", bucket=TruncHour("created_at", tzinfo=UTC))
         .annotate(n=Count("id")).iterator()), batch_size=2000)


class Migration(migrations.Migration):

    dependencies = [
        ("reconcilers", "0021_hash_v3"),
    ]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, old_key_recount),
        migrations.RemoveConstraint(model_name="resourcecount", name="resourcecount_key"),
        migrations.RemoveConstraint(model_name="transitioncount", name="transitioncount_key"),
        migrations.AddField(
            model_name="resourcecount", name="cluster",
            field=models.CharField(db_default="default", default="default", help_text="the cluster the object lives in",
                                   max_length=63)),
        migrations.AddField(
            model_name="resourcecountdelta", name="cluster",
            field=models.CharField(db_default="default", default="default", help_text="the cluster the object lives in",
                                   max_length=63)),
        migrations.AddField(
            model_name="transitioncount", name="cluster",
            field=models.CharField(db_default="default", default="default", help_text="the cluster the object lives in",
                                   max_length=63)),
        migrations.AddField(
            model_name="transitioncountdelta", name="cluster",
            field=models.CharField(db_default="default", default="default", help_text="the cluster the object lives in",
                                   max_length=63)),
        migrations.AddConstraint(
            model_name="resourcecount",
            constraint=models.UniqueConstraint(fields=("cluster", "kind", "group", "namespace", "phase", "deleted"),
                                               name="resourcecount_cluster_key")),
        migrations.AddConstraint(
            model_name="transitioncount",
            constraint=models.UniqueConstraint(fields=("bucket", "cluster", "kind", "namespace", "from_phase",
                                                       "to_phase"), name="transitioncount_cluster_key")),
        migrations.RunPython(install, uninstall),
    ]
