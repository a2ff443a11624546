"""Maintained counts for the overview and the metrics summary (`reconcilers.models.aggregates`): resources per
(kind, group, namespace, phase, deleted) and transitions per hour bucket and (kind, namespace, from, to), kept by
triggers in the same transaction as the write, whichever code path writes.

A trigger appends a +1 / -1 row to a delta table and takes no lock on a shared row, so concurrent recordings
neither wait on each other nor deadlock; readers fold the deltas into the totals
(`reconcilers.services.selectors.aggregates`). On PostgreSQL a row trigger on each of INSERT, DELETE and an UPDATE
that changes the key (WHEN ... IS DISTINCT FROM: the mirror's and the recording's other updates fire nothing) of
`reconcilers_resource`, and on INSERT of `reconcilers_transition` (which refuses UPDATE and DELETE). On SQLite the
same, less the DELETE trigger on the mirror: Django's flush empties SQLite tables with DELETE in no set order, which
would leave -1 rows behind; the product never deletes mirror rows (a deleted object's row is marked `deleted`).

The totals are filled from the rows present (one GROUP BY each) in the same migration.
"""

from datetime import UTC

from django.db import migrations, models
from django.db.models import Count
from django.db.models.functions import TruncHour

RESOURCE_KEY = 'kind, "group", namespace, phase, deleted'
TRANSITION_KEY = "bucket, kind, namespace, from_phase, to_phase"

POSTGRESQL = [
    f"""
    CREATE FUNCTION reconcilers_count_resource() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO reconcilers_resourcecountdelta ({RESOURCE_KEY}, n)
            VALUES (NEW.kind, NEW."group", NEW.namespace, NEW.phase, NEW.deleted, 1);
        ELSIF TG_OP = 'DELETE' THEN
            INSERT INTO reconcilers_resourcecountdelta ({RESOURCE_KEY}, n)
            VALUES (OLD.kind, OLD."group", OLD.namespace, OLD.phase, OLD.deleted, -1);
        ELSE
            INSERT INTO reconcilers_resourcecountdelta ({RESOURCE_KEY}, n)
            VALUES (OLD.kind, OLD."group", OLD.namespace, OLD.phase, OLD.deleted, -1),
                   (NEW.kind, NEW."group", NEW.namespace, NEW.phase, NEW.deleted, 1);
        END IF;
        RETURN NULL;
    END $$;
    """,
    "CREATE TRIGGER reconcilers_resource_count AFTER INSERT OR DELETE ON reconcilers_resource "
    "FOR EACH ROW EXECUTE FUNCTION reconcilers_count_resource();",
    'CREATE TRIGGER reconcilers_resource_count_moved AFTER UPDATE OF kind, "group", namespace, phase, deleted '
    "ON reconcilers_resource FOR EACH ROW WHEN (OLD.phase IS DISTINCT FROM NEW.phase "
    "OR OLD.deleted IS DISTINCT FROM NEW.deleted OR OLD.namespace IS DISTINCT FROM NEW.namespace "
    'OR OLD.kind IS DISTINCT FROM NEW.kind OR OLD."group" IS DISTINCT FROM NEW."group") '
    "EXECUTE FUNCTION reconcilers_count_resource();",
    f"""
    CREATE FUNCTION reconcilers_count_transition() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO reconcilers_transitioncountdelta ({TRANSITION_KEY}, n)
        VALUES (date_trunc('hour', NEW.created_at, 'UTC'), NEW.kind, NEW.namespace, NEW.from_phase, NEW.to_phase, 1);
        RETURN NULL;
    END $$;
    """,
    "CREATE TRIGGER reconcilers_transition_count AFTER INSERT ON reconcilers_transition "
    "FOR EACH ROW EXECUTE FUNCTION reconcilers_count_transition();",
]
POSTGRESQL_REVERSE = [
    "DROP TRIGGER IF EXISTS reconcilers_transition_count ON reconcilers_transition;",
    "DROP TRIGGER IF EXISTS reconcilers_resource_count_moved ON reconcilers_resource;",
    "DROP TRIGGER IF EXISTS reconcilers_resource_count ON reconcilers_resource;",
    "DROP FUNCTION IF EXISTS reconcilers_count_transition();",
    "DROP FUNCTION IF EXISTS reconcilers_count_resource();",
]
# SQLite keeps times as 'YYYY-MM-DD HH:MM:SS[.ffffff]' (UTC): the hour is the text up to the minutes
SQLITE = [
    f"""CREATE TRIGGER reconcilers_resource_count AFTER INSERT ON reconcilers_resource BEGIN
        INSERT INTO reconcilers_resourcecountdelta ({RESOURCE_KEY}, n)
        VALUES (NEW.kind, NEW."group", NEW.namespace, NEW.phase, NEW.deleted, 1);
    END;""",
    f"""CREATE TRIGGER reconcilers_resource_count_moved AFTER UPDATE OF kind, "group", namespace, phase, deleted
        ON reconcilers_resource FOR EACH ROW WHEN OLD.phase IS NOT NEW.phase OR OLD.deleted IS NOT NEW.deleted
        OR OLD.namespace IS NOT NEW.namespace OR OLD.kind IS NOT NEW.kind OR OLD."group" IS NOT NEW."group" BEGIN
        INSERT INTO reconcilers_resourcecountdelta ({RESOURCE_KEY}, n)
        VALUES (OLD.kind, OLD."group", OLD.namespace, OLD.phase, OLD.deleted, -1),
               (NEW.kind, NEW."group", NEW.namespace, NEW.phase, NEW.deleted, 1);
    END;""",
    f"""CREATE TRIGGER reconcilers_transition_count AFTER INSERT ON reconcilers_transition BEGIN
        INSERT INTO reconcilers_transitioncountdelta ({TRANSITION_KEY}, n)
        VALUES (strftime('%Y-%m-%d %H:00:00', NEW.created_at), NEW.kind, NEW.namespace, NEW.from_phase,
                NEW.to_phase, 1);
    END;""",
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS reconcilers_transition_count;",
    "DROP TRIGGER IF EXISTS reconcilers_resource_count_moved;",
    "DROP TRIGGER IF EXISTS reconcilers_resource_count;",
]


def _run(schema_editor, statements: dict[str, list[str]]) -> None:
    for sql in statements.get(schema_editor.connection.vendor, []):
        schema_editor.execute(sql)


def install(apps, schema_editor):
    """Fill the totals from the rows present, then install the triggers (one transaction on PostgreSQL)."""
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
    _run(schema_editor, {"postgresql": POSTGRESQL, "sqlite": SQLITE})


def uninstall(apps, schema_editor):
    _run(schema_editor, {"postgresql": POSTGRESQL_REVERSE, "sqlite": SQLITE_REVERSE})


class Migration(migrations.Migration):

    dependencies = [
        ('reconcilers', '0014_actionrecord'),
    ]

    operations = [
        migrations.CreateModel(
            name='ResourceCountDelta',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(max_length=63)),
                ('group', models.CharField(blank=True, max_length=253)),
                ('namespace', models.CharField(blank=True, max_length=63)),
                ('phase', models.CharField(blank=True, max_length=63)),
                ('deleted', models.BooleanField(default=False)),
                ('n', models.BigIntegerField(default=0)),
            ],
            options={
                'abstract': False,
            },
        ),
        migrations.CreateModel(
            name='TransitionCountDelta',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('bucket', models.DateTimeField(help_text='the hour (UTC) the transitions were recorded in')),
                ('kind', models.CharField(max_length=63)),
                ('namespace', models.CharField(blank=True, max_length=63)),
                ('from_phase', models.CharField(blank=True, max_length=63)),
                ('to_phase', models.CharField(max_length=63)),
                ('n', models.BigIntegerField(default=0)),
            ],
            options={
                'abstract': False,
            },
        ),
        migrations.CreateModel(
            name='ResourceCount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(max_length=63)),
                ('group', models.CharField(blank=True, max_length=253)),
                ('namespace', models.CharField(blank=True, max_length=63)),
                ('phase', models.CharField(blank=True, max_length=63)),
                ('deleted', models.BooleanField(default=False)),
                ('n', models.BigIntegerField(default=0)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('kind', 'group', 'namespace', 'phase', 'deleted'), name='resourcecount_key')],
            },
        ),
        migrations.CreateModel(
            name='TransitionCount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('bucket', models.DateTimeField(help_text='the hour (UTC) the transitions were recorded in')),
                ('kind', models.CharField(max_length=63)),
                ('namespace', models.CharField(blank=True, max_length=63)),
                ('from_phase', models.CharField(blank=True, max_length=63)),
                ('to_phase', models.CharField(max_length=63)),
                ('n', models.BigIntegerField(default=0)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('bucket', 'kind', 'namespace', 'from_phase', 'to_phase'), name='transitioncount_key')],
            },
        ),
        migrations.RunPython(install, uninstall),
    ]
