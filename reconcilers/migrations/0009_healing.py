"""Self-healing (issue 15): the Kubernetes Events archive (`KubeEvent`), the healing links of each resource's chain
(`HealingRecord`), the resource's healing state (active anomalies, suspension, rollback, pinned generation, the
healing link count) and transitions whose actor is a rollback being verified (`rollback:...`).

On PostgreSQL both new tables are append-only like the rest of the record (row triggers refuse UPDATE and
DELETE, statement triggers refuse TRUNCATE), and the retention path may delete old archived Events as it may
delete old runs (`SET LOCAL opsconsole.retention = 'on'`); healing records are never deleted.
"""

import importlib

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

_0002 = importlib.import_module("reconcilers.migrations.0002_append_only_triggers")
_0003 = importlib.import_module("reconcilers.migrations.0003_retention_may_delete_runs")

TABLES = ("reconcilers_healingrecord", "reconcilers_kubeevent")

REFUSE_CHANGE = """
CREATE OR REPLACE FUNCTION reconcilers_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND TG_TABLE_NAME IN ('reconcilers_reconcilerun', 'reconcilers_kubeevent')
       AND current_setting('opsconsole.retention', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'audit rows are never changed; see manage.py audit_verify';
END;
$$;
"""

FORWARD = [
    REFUSE_CHANGE,
    *(f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
      f"FOR EACH ROW EXECUTE FUNCTION reconcilers_refuse_change();" for table in TABLES),
    *(f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
      f"FOR EACH STATEMENT EXECUTE FUNCTION reconcilers_refuse_truncate();" for table in TABLES),
]
BACKWARD = [
    *(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table};" for table in TABLES),
    *(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table};" for table in TABLES),
    _0003.FORWARD,
]


class Migration(migrations.Migration):

    dependencies = [
        ('reconcilers', '0008_request_identity'),
        ('reconcilers', '0006_refuse_truncate'),
    ]

    operations = [
        migrations.CreateModel(
            name='HealingRecord',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('resource_uid', models.CharField(max_length=64)),
                ('kind', models.CharField(max_length=63)),
                ('namespace', models.CharField(blank=True, max_length=63)),
                ('name', models.CharField(max_length=253)),
                ('seq', models.PositiveIntegerField()),
                ('chain_after', models.PositiveIntegerField(default=0, help_text='the transition seq this record follows')),
                ('revision_after', models.PositiveIntegerField(default=0, help_text='the revision seq this record follows')),
                ('action', models.CharField(choices=[('anomaly.detected', 'Anomaly Detected'), ('anomaly.cleared', 'Anomaly Cleared'), ('rollback.started', 'Rollback Started'), ('rollback.succeeded', 'Rollback Succeeded'), ('rollback.failed', 'Rollback Failed'), ('rollback.refused', 'Rollback Refused'), ('suspended', 'Suspended'), ('resumed', 'Resumed'), ('pinned', 'Pinned'), ('unpinned', 'Unpinned')], max_length=32)),
                ('rule', models.CharField(blank=True, help_text='the anomaly rule, for anomaly records', max_length=63)),
                ('actor', models.CharField(help_text="'controller', 'user:<name>', 'manager:<field manager>', 'rollback:auto' or 'rollback:user:<name>'", max_length=255)),
                ('reason', models.TextField(blank=True)),
                ('message', models.TextField(blank=True)),
                ('generation', models.BigIntegerField(default=0, help_text="the object's generation when it happened")),
                ('target_generation', models.BigIntegerField(blank=True, help_text='rollback: the generation restored; pin: the one pinned', null=True)),
                ('detail', models.JSONField(blank=True, default=dict, help_text='the evidence (events, counts, deadlines)')),
                ('expires_at', models.DateTimeField(blank=True, help_text='suspend: when it ends by itself', null=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('prev_hash', models.CharField(blank=True, max_length=64)),
                ('hash', models.CharField(max_length=64)),
                ('hash_version', models.PositiveSmallIntegerField(db_default=2, default=2)),
            ],
            options={
                'base_manager_name': 'objects',
            },
        ),
        migrations.CreateModel(
            name='KubeEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('event_uid', models.CharField(max_length=64)),
                ('count', models.PositiveIntegerField(default=1)),
                ('occurrences', models.PositiveIntegerField(default=1, help_text='how many times it happened since the count archived before (the rules sum these)')),
                ('namespace', models.CharField(blank=True, max_length=63)),
                ('name', models.CharField(help_text="the Event object's name", max_length=253)),
                ('type', models.CharField(blank=True, help_text='Normal or Warning', max_length=16)),
                ('reason', models.CharField(blank=True, max_length=128)),
                ('message', models.TextField(blank=True)),
                ('involved_api_version', models.CharField(blank=True, max_length=253)),
                ('involved_kind', models.CharField(blank=True, max_length=63)),
                ('involved_namespace', models.CharField(blank=True, max_length=63)),
                ('involved_name', models.CharField(blank=True, max_length=253)),
                ('involved_uid', models.CharField(blank=True, max_length=64)),
                ('source', models.CharField(blank=True, help_text='reportingComponent or source.component', max_length=253)),
                ('first_timestamp', models.DateTimeField(blank=True, null=True)),
                ('last_timestamp', models.DateTimeField(blank=True, help_text='when this occurrence happened', null=True)),
                ('observed_at', models.DateTimeField(default=django.utils.timezone.now, help_text='when the controller archived it')),
            ],
            options={
                'base_manager_name': 'objects',
            },
        ),
        migrations.RemoveConstraint(
            model_name='transition',
            name='transition_actor_valid',
        ),
        migrations.AddField(
            model_name='resource',
            name='active_anomalies',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name='resource',
            name='auto_rollback',
            field=models.BooleanField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='resource',
            name='last_healing_seq',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='resource',
            name='pinned_generation',
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='resource',
            name='rollback',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='resource',
            name='suspended',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='resource',
            name='suspension',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='transition',
            name='actor',
            field=models.CharField(default='controller', help_text="'controller', 'user:<name>', or 'rollback:auto' / 'rollback:user:<name>' while a rollback is being verified", max_length=255),
        ),
        migrations.AddIndex(
            model_name='resource',
            index=models.Index(condition=models.Q(('deleted', False), models.Q(models.Q(('active_anomalies', {}), _negated=True), ('suspended', True), ('rollback__isnull', False), _connector='OR')), fields=['kind'], name='resource_live_healing'),
        ),
        migrations.AddConstraint(
            model_name='transition',
            constraint=models.CheckConstraint(condition=models.Q(('actor', 'controller'), ('actor__startswith', 'user:'), ('actor__startswith', 'rollback:'), _connector='OR'), name='transition_actor_valid_v2'),
        ),
        migrations.AddField(
            model_name='healingrecord',
            name='resource',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='healing_records', to='reconcilers.resource'),
        ),
        migrations.AddField(
            model_name='kubeevent',
            name='resource',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='kube_events', to='reconcilers.resource'),
        ),
        migrations.AddIndex(
            model_name='healingrecord',
            index=models.Index(fields=['resource', 'seq'], name='healingrecord_resource_seq'),
        ),
        migrations.AddIndex(
            model_name='healingrecord',
            index=models.Index(fields=['created_at'], include=('kind', 'action'), name='healingrecord_created'),
        ),
        migrations.AddConstraint(
            model_name='healingrecord',
            constraint=models.UniqueConstraint(fields=('resource_uid', 'seq'), name='healingrecord_uid_seq_unique'),
        ),
        migrations.AddConstraint(
            model_name='healingrecord',
            constraint=models.CheckConstraint(condition=models.Q(('seq__gte', 1)), name='healingrecord_seq_positive'),
        ),
        migrations.AddIndex(
            model_name='kubeevent',
            index=models.Index(fields=['resource', 'last_timestamp'], name='kubeevent_resource_last'),
        ),
        migrations.AddIndex(
            model_name='kubeevent',
            index=models.Index(fields=['last_timestamp'], include=('resource', 'type', 'reason'), name='kubeevent_last_reason'),
        ),
        migrations.AddIndex(
            model_name='kubeevent',
            index=models.Index(fields=['observed_at'], name='kubeevent_observed_at'),
        ),
        migrations.AddConstraint(
            model_name='kubeevent',
            constraint=models.UniqueConstraint(fields=('event_uid', 'count'), name='kubeevent_uid_count_unique'),
        ),
        _0002.PostgreSQLOnlyRunSQL(sql=FORWARD, reverse_sql=BACKWARD),
    ]
