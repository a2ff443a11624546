"""The roles as Django groups (viewer, operator, admin), and on PostgreSQL a trigger refusing UPDATE and
DELETE on the action record (it reuses reconcilers' refusing function)."""

from django.db import migrations

ROLES = ("viewer", "operator", "admin")
TABLE = "accounts_actionrecord"


def create_roles(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    for name in ROLES:
        Group.objects.get_or_create(name=name)


def remove_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=ROLES).delete()


class PostgreSQLOnlyRunSQL(migrations.RunSQL):
    """RunSQL applied only on PostgreSQL."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("reconcilers", "0002_append_only_triggers"),
    ]

    operations = [
        migrations.RunPython(create_roles, remove_roles),
        PostgreSQLOnlyRunSQL(
            sql=[f"CREATE TRIGGER {TABLE}_append_only BEFORE UPDATE OR DELETE ON {TABLE} "
                 f"FOR EACH ROW EXECUTE FUNCTION reconcilers_refuse_change();"],
            reverse_sql=[f"DROP TRIGGER IF EXISTS {TABLE}_append_only ON {TABLE};"],
        ),
    ]
