"""An index for a resource page's admission decisions (`accounts.services.admission_decisions`: the records whose
action starts with `admission.` and whose target is `Kind namespace/name`, newest first). Partial: only admission
records, whose targets are Kubernetes names (ASCII, far below a B-tree entry's size limit, which a free-text
target of another action could pass). Creating an index fires none of the table's triggers and changes no row."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("accounts", "0006_actionrecord_detail_uid")]

    operations = [
        migrations.AddIndex(
            model_name="actionrecord",
            index=models.Index(fields=["target", "-seq"], name="actionrecord_admission_target",
                               condition=models.Q(action__startswith="admission.")),
        ),
    ]
