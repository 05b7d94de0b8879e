"""Leaner indexes on the receipt tables, so that each receipt's commit writes fewer pages.

- ``audit_app_injectionrecord.project_id`` loses its own index: ``injection_project_recent``
  (project_id, created_at) serves every lookup by project.
- Each ``audit_app_receiptsource`` row links one source (its kind's): the four link columns'
  full indexes become partial ones, ``WHERE <link> IS NOT NULL``.

The fields change in Django's state only; in the database the old indexes are dropped by
name (as introspection finds them) and the new ones created. Altering the fields through the
schema editor would rebuild both tables on SQLite, and a rebuilt injection log table would lose
the triggers that keep it append-only (migration 0003).
"""

import django.db.models.deletion
from django.db import migrations, models


#: The (table's model, column) whose plain single-column indexes are replaced.
REPLACED = (
    ("injectionrecord", "project_id"),
    ("receiptsource", "trace_id"),
    ("receiptsource", "summary_id"),
    ("receiptsource", "fact_id"),
    ("receiptsource", "episode_id"),
)


def _drop_plain_indexes(apps, schema_editor):
    connection = schema_editor.connection
    for model_name, column in REPLACED:
        table = apps.get_model("audit_app", model_name)._meta.db_table
        with connection.cursor() as cursor:
            found = connection.introspection.get_constraints(cursor, table)
        for name, info in found.items():
            plain = info["index"] and not info["unique"] and not info["primary_key"]
            if plain and info["columns"] == [column]:
                schema_editor.execute(f"DROP INDEX {schema_editor.quote_name(name)}")


def _restore_plain_indexes(apps, schema_editor):
    for model_name, column in REPLACED:
        model = apps.get_model("audit_app", model_name)
        name = f"{model._meta.db_table[:20]}_{column[:-3]}_plain"
        schema_editor.add_index(model, models.Index(fields=[column[:-3]], name=name))


class Migration(migrations.Migration):
    dependencies = [
        ("audit_app", "0006_review_queue"),
        ("graph_app", "0004_change_log"),
        ("memoryproject", "0003_compliance_officer_group"),
        ("sessions_app", "0002_trace_id_per_project"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="injectionrecord",
                    name="project",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="injections",
                        to="memoryproject.project",
                    ),
                ),
                migrations.AlterField(
                    model_name="receiptsource",
                    name="episode",
                    field=models.ForeignKey(
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="graph_app.episode",
                    ),
                ),
                migrations.AlterField(
                    model_name="receiptsource",
                    name="fact",
                    field=models.ForeignKey(
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="graph_app.temporalfact",
                    ),
                ),
                migrations.AlterField(
                    model_name="receiptsource",
                    name="summary",
                    field=models.ForeignKey(
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="sessions_app.sessionsummary",
                    ),
                ),
                migrations.AlterField(
                    model_name="receiptsource",
                    name="trace",
                    field=models.ForeignKey(
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="sessions_app.trace",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunPython(_drop_plain_indexes, _restore_plain_indexes),
            ],
        ),
        migrations.AddIndex(
            model_name="receiptsource",
            index=models.Index(
                condition=models.Q(("trace__isnull", False)),
                fields=["trace"],
                name="receipt_source_trace",
            ),
        ),
        migrations.AddIndex(
            model_name="receiptsource",
            index=models.Index(
                condition=models.Q(("summary__isnull", False)),
                fields=["summary"],
                name="receipt_source_summary",
            ),
        ),
        migrations.AddIndex(
            model_name="receiptsource",
            index=models.Index(
                condition=models.Q(("fact__isnull", False)),
                fields=["fact"],
                name="receipt_source_fact",
            ),
        ),
        migrations.AddIndex(
            model_name="receiptsource",
            index=models.Index(
                condition=models.Q(("episode__isnull", False)),
                fields=["episode"],
                name="receipt_source_episode",
            ),
        ),
    ]
