"""Indexes for the console at 100,000 resources (issue 40; see `reconcilers.models.resource`):

- (name, id), (namespace, id), (kind, id), (phase, id) and (COALESCE(phase_since, epoch), id): the resources
  table's sorts, each page an index range scan from the cursor's row (`opsconsole.console.paging`) instead of a
  sort of the whole mirror. The "last reconcile" sort has none on purpose: every run sets last_reconcile_at.
- `resource_live_phase_since`: (kind, phase, phase_since) INCLUDE (namespace) WHERE NOT deleted: the overview's
  time in the current phase (oldest and middle entry per phase by position; INCLUDE is PostgreSQL's only).
"""

import datetime

import django.db.models.functions.comparison
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('reconcilers', '0015_maintained_counts'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='resource',
            index=models.Index(fields=['name', 'id'], name='resource_name_id'),
        ),
        migrations.AddIndex(
            model_name='resource',
            index=models.Index(fields=['namespace', 'id'], name='resource_namespace_id'),
        ),
        migrations.AddIndex(
            model_name='resource',
            index=models.Index(fields=['kind', 'id'], name='resource_kind_id'),
        ),
        migrations.AddIndex(
            model_name='resource',
            index=models.Index(fields=['phase', 'id'], name='resource_phase_id'),
        ),
        migrations.AddIndex(
            model_name='resource',
            index=models.Index(django.db.models.functions.comparison.Coalesce('phase_since', models.Value(datetime.datetime(1970, 1, 1, 0, 0, tzinfo=datetime.UTC))), models.F('id'), name='resource_since_id'),
        ),
        migrations.AddIndex(
            model_name='resource',
            index=models.Index(condition=models.Q(('deleted', False)), fields=['kind', 'phase', 'phase_since'], include=('namespace',), name='resource_live_phase_since'),
        ),
    ]
