"""An index for the admission recorder's duplicate check (`detail__uid` with the action): an expression index on
the decision's uid in `detail` (`detail -> 'uid'`, the expression Django's JSON key lookup compiles to on
PostgreSQL; SQLite indexes its JSON_EXTRACT) and the action. Creating an index fires none of the table's triggers
(append-only, no truncate) and changes no stored row, so the hash chain is untouched. At 1,000,000 action records
the check was a sequential scan of every record's JSON (docs/benchmarks.md)."""

import django.db.models.fields.json
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("accounts", "0005_actionrecord_chain")]

    operations = [
        migrations.AddIndex(
            model_name="actionrecord",
            index=models.Index(django.db.models.fields.json.KeyTransform("uid", "detail"), models.F("action"),
                               name="actionrecord_detail_uid"),
        ),
    ]
