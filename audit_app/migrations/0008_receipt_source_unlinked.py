"""Receipt sources are looked up by their link (``receipts_delivering``): the (kind, item_id)
index, which every receipt's commit wrote a page of per delivered item, is replaced by one on
the item ids of the rows that link no source row (a source gone when it was delivered).
Dropping and creating an index does not rebuild the table on SQLite."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("audit_app", "0007_receipt_indexes_lean"),
        ("graph_app", "0004_change_log"),
        ("sessions_app", "0002_trace_id_per_project"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="receiptsource",
            name="receipt_source_item",
        ),
        migrations.AddIndex(
            model_name="receiptsource",
            index=models.Index(
                condition=models.Q(
                    ("summary__isnull", True),
                    ("trace__isnull", True),
                    ("episode__isnull", True),
                    ("fact__isnull", True),
                ),
                fields=["item_id"],
                name="receipt_source_unlinked",
            ),
        ),
    ]
