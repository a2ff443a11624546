"""Spec revisions (append-only, chained with the transitions), out-of-band anomalies, the chain's revision head.

On PostgreSQL the new table gets the append-only trigger of migration 0002 (whose function it reuses).
"""

import importlib

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

_0002 = importlib.import_module("reconcilers.migrations.0002_append_only_triggers")

TRIGGER = ("CREATE TRIGGER reconcilers_specrevision_append_only BEFORE UPDATE OR DELETE ON reconcilers_specrevision "
           "FOR EACH ROW EXECUTE FUNCTION reconcilers_refuse_change();")
UNTRIGGER = "DROP TRIGGER IF EXISTS reconcilers_specrevision_append_only ON reconcilers_specrevision;"


class Migration(migrations.Migration):

    dependencies = [
        ('reconcilers', '0004_overview_indexes'),
    ]

    operations = [
        migrations.CreateModel(
            name='SpecRevision',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('resource_uid', models.CharField(max_length=64)),
                ('kind', models.CharField(max_length=63)),
                ('namespace', models.CharField(blank=True, max_length=63)),
                ('name', models.CharField(max_length=253)),
                ('seq', models.PositiveIntegerField()),
                ('chain_after', models.PositiveIntegerField(default=0, help_text='the transition seq this revision follows')),
                ('generation', models.BigIntegerField()),
                ('resource_version', models.CharField(blank=True, max_length=64)),
                ('spec', models.JSONField(blank=True, default=dict)),
                ('diff', models.JSONField(blank=True, default=list, help_text='[{path, op, old, new}] from the previous revision (all of it for the first)')),
                ('actor', models.CharField(blank=True, help_text="'manager:<field manager>' of the newest entry owning a changed field", max_length=255)),
                ('operation', models.CharField(blank=True, help_text="that entry's operation (Update, Apply)", max_length=32)),
                ('managers', models.JSONField(blank=True, default=list, help_text='every managedFields entry owning a changed field, newest first')),
                ('changed_at', models.DateTimeField(blank=True, help_text="that entry's time", null=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('prev_hash', models.CharField(blank=True, max_length=64)),
                ('hash', models.CharField(max_length=64)),
            ],
            options={
                'base_manager_name': 'objects',
            },
        ),
        migrations.RemoveConstraint(
            model_name='anomaly',
            name='anomaly_once_per_generation',
        ),
        migrations.AddField(
            model_name='anomaly',
            name='category',
            field=models.CharField(choices=[('refused', 'Refused'), ('out_of_band', 'Out Of Band')], default='refused', max_length=16),
        ),
        migrations.AddField(
            model_name='anomaly',
            name='observed',
            field=models.JSONField(blank=True, default=dict, help_text='out of band: the status written and its managedFields entry'),
        ),
        migrations.AddField(
            model_name='resource',
            name='last_revision_seq',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddConstraint(
            model_name='anomaly',
            constraint=models.UniqueConstraint(condition=models.Q(('category', 'refused')), fields=('resource', 'from_phase', 'to_phase', 'generation'), name='anomaly_once_per_generation'),
        ),
        migrations.AddField(
            model_name='specrevision',
            name='resource',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='revisions', to='reconcilers.resource'),
        ),
        migrations.AddIndex(
            model_name='specrevision',
            index=models.Index(fields=['resource', 'generation'], name='specrevision_resource_gen'),
        ),
        migrations.AddConstraint(
            model_name='specrevision',
            constraint=models.UniqueConstraint(fields=('resource_uid', 'seq'), name='specrevision_uid_seq_unique'),
        ),
        migrations.AddConstraint(
            model_name='specrevision',
            constraint=models.UniqueConstraint(fields=('resource_uid', 'generation'), name='specrevision_uid_generation_unique'),
        ),
        migrations.AddConstraint(
            model_name='specrevision',
            constraint=models.CheckConstraint(condition=models.Q(('seq__gte', 1)), name='specrevision_seq_positive'),
        ),
        _0002.PostgreSQLOnlyRunSQL(sql=[TRIGGER], reverse_sql=[UNTRIGGER]),
    ]
