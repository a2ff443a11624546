"""On PostgreSQL the action record refuses TRUNCATE as well as UPDATE and DELETE (the statement-level trigger
function of reconcilers 0006, which lets Django's test flush through in test databases only)."""

import importlib

from django.db import migrations

_0002 = importlib.import_module("opsconsole.accounts.migrations.0002_roles_and_append_only")
TABLE = "accounts_actionrecord"


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_token_description_and_role"),
        ("reconcilers", "0006_refuse_truncate"),
    ]

    operations = [
        _0002.PostgreSQLOnlyRunSQL(
            sql=[f"CREATE TRIGGER {TABLE}_no_truncate BEFORE TRUNCATE ON {TABLE} "
                 f"FOR EACH STATEMENT EXECUTE FUNCTION reconcilers_refuse_truncate();"],
            reverse_sql=[f"DROP TRIGGER IF EXISTS {TABLE}_no_truncate ON {TABLE};"],
        ),
    ]
