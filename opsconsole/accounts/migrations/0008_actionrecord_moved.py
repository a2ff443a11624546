"""`ActionRecord` now belongs to the reconcilers app (`reconcilers.models.actions`, its migration 0014): removed
from this app's state only. The table `accounts_actionrecord` keeps its name, rows, indexes and triggers, so nothing
runs on the database.
"""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0007_actionrecord_admission_target"),
        ("reconcilers", "0014_actionrecord"),  # the model is in the reconcilers app's state first
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[migrations.DeleteModel(name="ActionRecord")],
        ),
    ]
