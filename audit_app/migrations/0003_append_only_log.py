"""Receipts name what was asked and delivered; delivered texts move to their own table (keyed
by SHA-256, so they can be erased); checkpoints; and triggers that make the log tables
append-only on SQLite and PostgreSQL.

Records written before this migration keep ``format`` 1 (their hash covers the fields it had);
new records are format 2. The triggers are created last: on SQLite the ALTERs above rebuild the
table, which would drop them.
"""

import hashlib

import django.db.models.deletion
from django.db import migrations, models

LOG_TABLES = ("audit_app_injectionrecord", "audit_app_auditcheckpoint", "audit_app_erasedtext")
HEAD = "audit_app_injectionloghead"
TEXTS = "audit_app_deliveredtext"
SWITCH = "audit_app_auditmaintenance"
ALL_TABLES = (*LOG_TABLES, HEAD, TEXTS)

# --- SQLite: the one-row switch table opens the gate ------------------------------------------
SQLITE_CLOSED = f"NOT COALESCE((SELECT enabled FROM {SWITCH} WHERE id = 1), 0)"
SQLITE_HEAD_BACKWARDS = (
    "(NEW.id <> OLD.id OR NEW.seq <> OLD.seq + 1 OR NOT EXISTS (SELECT 1 FROM "
    "audit_app_injectionrecord WHERE seq = NEW.seq AND record_hash = NEW.last_hash))"
)
SQLITE_NO_TOMBSTONE = "NOT EXISTS (SELECT 1 FROM audit_app_erasedtext WHERE sha256 = OLD.sha256)"


def _sqlite_trigger(table, op, when):
    name = f"{table}_no_{op.lower()}"
    return (
        f"CREATE TRIGGER {name} BEFORE {op} ON {table} WHEN {when} "
        f"BEGIN SELECT RAISE(ABORT, '{table} is append-only: {op} refused'); END"
    )


def sqlite_install():
    statements = []
    for table in LOG_TABLES:
        statements.append(_sqlite_trigger(table, "UPDATE", SQLITE_CLOSED))
        statements.append(_sqlite_trigger(table, "DELETE", SQLITE_CLOSED))
    statements.append(_sqlite_trigger(HEAD, "UPDATE", f"{SQLITE_CLOSED} AND {SQLITE_HEAD_BACKWARDS}"))
    statements.append(_sqlite_trigger(HEAD, "DELETE", SQLITE_CLOSED))
    statements.append(_sqlite_trigger(TEXTS, "UPDATE", SQLITE_CLOSED))
    statements.append(_sqlite_trigger(TEXTS, "DELETE", f"{SQLITE_CLOSED} AND {SQLITE_NO_TOMBSTONE}"))
    # The switch row survives any DELETE (a test flush among them): a missing row would read
    # as closed anyway, but keeping it keeps the gate usable.
    statements.append(
        f"CREATE TRIGGER {SWITCH}_keep BEFORE DELETE ON {SWITCH} BEGIN SELECT RAISE(IGNORE); END"
    )
    statements.append(f"INSERT OR IGNORE INTO {SWITCH} (id, enabled) VALUES (1, 0)")
    return statements


def sqlite_remove():
    names = [f"{table}_no_{op}" for table in ALL_TABLES for op in ("update", "delete")]
    return [*(f"DROP TRIGGER IF EXISTS {name}" for name in names), f"DROP TRIGGER IF EXISTS {SWITCH}_keep"]


# --- PostgreSQL: a transaction-local setting opens the gate -----------------------------------
PG_OPEN = "current_setting('app.audit_maintenance', true) = 'on'"
PG_PASS = (
    "IF TG_LEVEL = 'STATEMENT' THEN RETURN NULL; ELSIF TG_OP = 'DELETE' THEN RETURN OLD; "
    "ELSE RETURN NEW; END IF;"
)
PG_REFUSE = (
    "RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP "
    "USING ERRCODE = 'restrict_violation';"
)


def _pg_function(name, allowed):
    return (
        f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF {PG_OPEN} OR ({allowed}) THEN {PG_PASS} END IF; {PG_REFUSE} END $$"
    )


def pg_install():
    statements = [
        _pg_function("audit_append_only", "false"),
        _pg_function(
            "audit_head_forward",
            "TG_OP = 'UPDATE' AND NEW.id = OLD.id AND NEW.seq = OLD.seq + 1 AND EXISTS (SELECT 1 "
            "FROM audit_app_injectionrecord WHERE seq = NEW.seq AND record_hash = NEW.last_hash)",
        ),
        _pg_function(
            "audit_text_erasable",
            "TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM audit_app_erasedtext "
            "WHERE sha256 = OLD.sha256)",
        ),
    ]
    row_function = {HEAD: "audit_head_forward", TEXTS: "audit_text_erasable"}
    for table in ALL_TABLES:
        function = row_function.get(table, "audit_append_only")
        statements.append(
            f"CREATE TRIGGER {table}_no_change BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION {function}()"
        )
        statements.append(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only()"
        )
    return statements


def pg_remove():
    statements = []
    for table in ALL_TABLES:
        statements.append(f"DROP TRIGGER IF EXISTS {table}_no_change ON {table}")
        statements.append(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
    for name in ("audit_append_only", "audit_head_forward", "audit_text_erasable"):
        statements.append(f"DROP FUNCTION IF EXISTS {name}()")
    return statements


def _run(schema_editor, statements):
    for statement in statements:
        schema_editor.execute(statement, params=None)


def install_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        _run(schema_editor, sqlite_install())
    elif vendor == "postgresql":
        _run(schema_editor, pg_install())


def remove_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        _run(schema_editor, sqlite_remove())
    elif vendor == "postgresql":
        _run(schema_editor, pg_remove())


def texts_to_store(apps, schema_editor):
    """Every delivered text, once, under the SHA-256 of the text itself (a text that no longer
    matches its record's prompt_sha256 then shows as missing: the evidence is kept)."""
    record_model = apps.get_model("audit_app", "InjectionRecord")
    text_model = apps.get_model("audit_app", "DeliveredText")
    seen = set()
    batch = []
    rows = record_model.objects.order_by("seq").values_list("system_prompt", "created_at")
    for text, created_at in rows.iterator(chunk_size=2000):
        if not text:
            continue
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if digest in seen:
            continue
        seen.add(digest)
        batch.append(text_model(sha256=digest, text=text, stored_at=created_at))
        if len(batch) >= 500:
            text_model.objects.bulk_create(batch)
            batch = []
    text_model.objects.bulk_create(batch)


def texts_back(apps, schema_editor):
    record_model = apps.get_model("audit_app", "InjectionRecord")
    text_model = apps.get_model("audit_app", "DeliveredText")
    for sha256, text in text_model.objects.values_list("sha256", "text").iterator():
        record_model.objects.filter(prompt_sha256=sha256).update(system_prompt=text)


class Migration(migrations.Migration):

    dependencies = [
        ("audit_app", "0002_contradiction_audit"),
        ("memoryproject", "0002_default_project"),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditCheckpoint",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("created_at", models.DateTimeField()),
                ("log_seq", models.PositiveBigIntegerField()),
                ("log_head", models.CharField(max_length=64)),
                ("body", models.JSONField()),
                ("mac", models.CharField(max_length=64)),
            ],
            options={"ordering": ["-id"]},
        ),
        migrations.CreateModel(
            name="AuditMaintenance",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("enabled", models.BooleanField(default=False)),
            ],
            options={"abstract": False},
        ),
        migrations.CreateModel(
            name="DeliveredText",
            fields=[
                ("sha256", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("text", models.TextField()),
                ("stored_at", models.DateTimeField()),
            ],
            options={"abstract": False},
        ),
        migrations.CreateModel(
            name="ErasedText",
            fields=[
                ("sha256", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("erased_at", models.DateTimeField()),
                ("reason", models.TextField(blank=True)),
            ],
            options={"abstract": False},
        ),
        # Existing records are format 1; the default for new ones is 2.
        migrations.AddField(
            model_name="injectionrecord",
            name="format",
            field=models.PositiveSmallIntegerField(default=1),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="injectionrecord",
            name="format",
            field=models.PositiveSmallIntegerField(default=2),
        ),
        migrations.AddField(
            model_name="injectionrecord",
            name="items",
            field=models.JSONField(default=list),
        ),
        migrations.AddField(
            model_name="injectionrecord",
            name="request",
            field=models.JSONField(default=dict),
        ),
        migrations.RunPython(texts_to_store, texts_back),
        migrations.RemoveField(
            model_name="injectionrecord",
            name="system_prompt",
        ),
        migrations.AlterField(
            model_name="injectionrecord",
            name="project",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="injections",
                to="memoryproject.project",
            ),
        ),
        migrations.AddIndex(
            model_name="injectionrecord",
            index=models.Index(fields=["source", "seq"], name="injection_source_seq"),
        ),
        migrations.AddIndex(
            model_name="injectionrecord",
            index=models.Index(fields=["prompt_sha256"], name="injection_prompt_sha256"),
        ),
        migrations.RunPython(install_triggers, remove_triggers),
    ]
