# A trace id is unique within its project, not across projects.

import uuid

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0001_initial"),
    ]

    operations = [
        migrations.AlterField(
            model_name="trace",
            name="trace_id",
            field=models.UUIDField(db_index=True, default=uuid.uuid4, editable=False),
        ),
        migrations.AddConstraint(
            model_name="trace",
            constraint=models.UniqueConstraint(
                fields=("project", "trace_id"), name="trace_unique_per_project"
            ),
        ),
    ]
