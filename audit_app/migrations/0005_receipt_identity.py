"""Receipts record the authenticated identity in ``client`` and, beside it, the name the client
gave itself (``client_reported``: self-reported, unverified).

The column is added in place: on SQLite Django's AddField rebuilds the table, which the
append-only triggers (they name the table) refuse. Existing rows get "" and keep their hashes
(the chain hashes the field only when it is not empty).
"""

from django.db import migrations, models

FIELD = models.CharField(
    blank=True, default="", max_length=200, verbose_name="client (self-reported)"
)


def add_column(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(
            'ALTER TABLE "audit_app_injectionrecord" '
            "ADD COLUMN \"client_reported\" varchar(200) NOT NULL DEFAULT ''"
        )
        return
    model = apps.get_model("audit_app", "InjectionRecord")
    schema_editor.add_field(model, model._meta.get_field("client_reported"))


def drop_column(apps, schema_editor):
    model = apps.get_model("audit_app", "InjectionRecord")
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(
            'ALTER TABLE "audit_app_injectionrecord" DROP COLUMN "client_reported"'
        )
        return
    schema_editor.remove_field(model, model._meta.get_field("client_reported"))


class Migration(migrations.Migration):
    dependencies = [
        ("audit_app", "0004_receipt_sources"),
    ]

    operations = [
        # The state first, so the column is added from the model that has the field.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="injectionrecord", name="client_reported", field=FIELD
                ),
            ],
        ),
        migrations.RunPython(add_column, drop_column),
    ]
