"""The action record joins the other chained tables: `ActionRecord` moves from the accounts app to this one in
Django's state only. The table (`accounts_actionrecord`), its indexes, its append-only triggers and its rows stay
as the accounts app's migrations 0001–0007 made them, so nothing runs on the database; accounts 0008 removes the
model from the accounts app's state after this migration.
"""

import django.db.models.fields.json
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("reconcilers", "0013_healing_rollback_superseded"),
        ("accounts", "0007_actionrecord_admission_target"),  # the table as the accounts app left it
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="ActionRecord",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                                   verbose_name="ID")),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("actor", models.CharField(blank=True, help_text="the username, '' when unauthenticated",
                                                   max_length=150)),
                        ("auth", models.CharField(blank=True, help_text="session, token or '' (none)", max_length=16)),
                        ("token_prefix", models.CharField(blank=True, max_length=16)),
                        ("action", models.CharField(
                            help_text="e.g. resource.reconcile, queue.retry_now, token.create", max_length=64)),
                        ("method", models.CharField(max_length=8)),
                        ("path", models.CharField(max_length=1024)),
                        ("target", models.CharField(blank=True, max_length=1024)),
                        ("reason", models.TextField(blank=True)),
                        ("outcome", models.CharField(choices=[("allowed", "Allowed"), ("refused", "Refused"),
                                                              ("rejected", "Rejected"), ("failed", "Failed")],
                                                     max_length=16)),
                        ("status_code", models.PositiveSmallIntegerField()),
                        ("detail", models.JSONField(blank=True, default=dict)),
                        ("remote_addr", models.CharField(blank=True, max_length=64)),
                        ("seq", models.PositiveBigIntegerField(help_text="the record's place in the chain: 1, 2, 3…",
                                                               unique=True)),
                        ("prev_hash", models.CharField(blank=True, max_length=64)),
                        ("hash", models.CharField(max_length=64)),
                    ],
                    options={
                        "db_table": "accounts_actionrecord",
                        "base_manager_name": "objects",
                        "indexes": [
                            models.Index(fields=["created_at"], name="actionrecord_created"),
                            models.Index(fields=["actor", "created_at"], name="actionrecord_actor_created"),
                            models.Index(fields=["outcome", "created_at"], name="actionrecord_outcome_created"),
                            models.Index(django.db.models.fields.json.KeyTransform("uid", "detail"), models.F("action"),
                                         name="actionrecord_detail_uid"),
                            models.Index(condition=models.Q(("action__startswith", "admission.")),
                                         fields=["target", "-seq"], name="actionrecord_admission_target"),
                        ],
                    },
                ),
            ],
        ),
    ]
