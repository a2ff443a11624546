"""Indexes for the console's overview (see reconcilers.services.selectors.stats).

- `transition_created_edges`: (created_at) INCLUDE (kind, from_phase, to_phase, namespace): the edge counts of
  the last hour and day, one query for both windows, read from the index alone (PostgreSQL index-only scan).
- `transition_kind_from_created`: (kind, from_phase, created_at) INCLUDE (resource, seq, namespace): the newest
  departures from one state, a bounded backward range scan.
- `transition_resource_seq`: (resource, seq) INCLUDE (created_at): the transition that entered the state each
  of those departures left (seq - 1 of the same resource), without visiting the table.
- `resource_live_kind_phase`: (kind, phase, namespace) WHERE NOT deleted: live resources per kind and phase.

INCLUDE is PostgreSQL only; other databases get the key columns alone.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("reconcilers", "0003_retention_may_delete_runs")]

    operations = [
        migrations.AddIndex(
            model_name="transition",
            index=models.Index(fields=["created_at"], include=["kind", "from_phase", "to_phase", "namespace"],
                               name="transition_created_edges"),
        ),
        migrations.AddIndex(
            model_name="transition",
            index=models.Index(fields=["kind", "from_phase", "created_at"], include=["resource", "seq", "namespace"],
                               name="transition_kind_from_created"),
        ),
        migrations.AddIndex(
            model_name="transition",
            index=models.Index(fields=["resource", "seq"], include=["created_at"], name="transition_resource_seq"),
        ),
        migrations.AddIndex(
            model_name="resource",
            index=models.Index(fields=["kind", "phase", "namespace"], condition=models.Q(deleted=False),
                               name="resource_live_kind_phase"),
        ),
    ]
