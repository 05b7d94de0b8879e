"""The maintenance gate no longer opens by a value anyone with SQL can set.

Before: SQLite's triggers let changes through while a one-row switch table said so, and
PostgreSQL's while the session had set ``app.audit_maintenance`` to 'on': one UPDATE or one SET
opened the append-only tables. Now:

- SQLite: the triggers call ``memoryproject_gate_open()``, which only this service's own
  connections define (audit_app.gate); elsewhere the statement fails with "no such function".
- PostgreSQL: the triggers let a change through only in a transaction that inserted a
  maintenance grant row (the service signs each into the witness; verifiers report any row the
  witness does not hold). Grant rows are append-only as well.

Every trigger is replaced (the injection log's tables and the graph change log); the switch
table goes.
"""

from django.db import migrations, models

LOG_TABLES = (
    "audit_app_injectionrecord",
    "audit_app_auditcheckpoint",
    "audit_app_erasedtext",
    "audit_app_auditmaintenancegrant",
)
HEAD = "audit_app_injectionloghead"
TEXTS = "audit_app_deliveredtext"
CHANGES = "graph_app_graphchange"
ALL_TABLES = (*LOG_TABLES, HEAD, TEXTS)
SWITCH = "audit_app_auditmaintenance"

# --- SQLite -----------------------------------------------------------------------------------
SQLITE_CLOSED = "NOT memoryproject_gate_open()"
SQLITE_HEAD_BACKWARDS = (
    "(NEW.id <> OLD.id OR NEW.seq <> OLD.seq + 1 OR NOT EXISTS (SELECT 1 FROM "
    "audit_app_injectionrecord WHERE seq = NEW.seq AND record_hash = NEW.last_hash))"
)
SQLITE_NO_TOMBSTONE = "NOT EXISTS (SELECT 1 FROM audit_app_erasedtext WHERE sha256 = OLD.sha256)"


def _sqlite_trigger(name, table, op, when):
    return (
        f"CREATE TRIGGER {name} BEFORE {op} ON {table} WHEN {when} "
        f"BEGIN SELECT RAISE(ABORT, '{table} is append-only: {op} refused'); END"
    )


def _sqlite_names():
    names = [f"{table}_no_{op}" for table in ALL_TABLES for op in ("update", "delete")]
    return [*names, "graph_change_no_update", "graph_change_no_delete", f"{SWITCH}_keep"]


def sqlite_install():
    statements = [f"DROP TRIGGER IF EXISTS {name}" for name in _sqlite_names()]
    for table in LOG_TABLES:
        for op in ("UPDATE", "DELETE"):
            statements.append(_sqlite_trigger(f"{table}_no_{op.lower()}", table, op, SQLITE_CLOSED))
    statements.append(
        _sqlite_trigger(
            f"{HEAD}_no_update", HEAD, "UPDATE", f"{SQLITE_CLOSED} AND {SQLITE_HEAD_BACKWARDS}"
        )
    )
    statements.append(_sqlite_trigger(f"{HEAD}_no_delete", HEAD, "DELETE", SQLITE_CLOSED))
    statements.append(_sqlite_trigger(f"{TEXTS}_no_update", TEXTS, "UPDATE", SQLITE_CLOSED))
    statements.append(
        _sqlite_trigger(
            f"{TEXTS}_no_delete", TEXTS, "DELETE", f"{SQLITE_CLOSED} AND {SQLITE_NO_TOMBSTONE}"
        )
    )
    for op in ("UPDATE", "DELETE"):
        statements.append(
            _sqlite_trigger(f"graph_change_no_{op.lower()}", CHANGES, op, SQLITE_CLOSED)
        )
    return statements


# --- PostgreSQL -------------------------------------------------------------------------------
PG_OPEN = "EXISTS (SELECT 1 FROM audit_app_auditmaintenancegrant WHERE txid = txid_current())"
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
        _pg_function("graph_change_append_only", "false"),
    ]
    # The grant table is new: its triggers are made here; the others exist and keep theirs
    # (the functions they call are replaced above).
    table = "audit_app_auditmaintenancegrant"
    statements.append(
        f"CREATE TRIGGER {table}_no_change BEFORE UPDATE OR DELETE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION audit_append_only()"
    )
    statements.append(
        f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
        "FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only()"
    )
    return statements


def install(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    statements = {"sqlite": sqlite_install, "postgresql": pg_install}.get(vendor, list)()
    for statement in statements:
        schema_editor.execute(statement, params=None)


def roles_follow(apps, schema_editor):
    """The compliance officer views grants as every audit table; the switch table's
    permissions go with it."""
    from memoryproject.roles import COMPLIANCE_OFFICER, _permission

    permission_model = apps.get_model("auth", "Permission")
    permission_model.objects.filter(
        content_type__app_label="audit_app", content_type__model="auditmaintenance"
    ).delete()
    group = apps.get_model("auth", "Group").objects.filter(name=COMPLIANCE_OFFICER).first()
    if group is not None:
        group.permissions.add(
            _permission(
                apps,
                "audit_app",
                "auditmaintenancegrant",
                "view_auditmaintenancegrant",
                "Can view audit maintenance grant",
            )
        )


class Migration(migrations.Migration):
    dependencies = [
        ("audit_app", "0008_receipt_source_unlinked"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("graph_app", "0004_change_log"),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditMaintenanceGrant",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("created_at", models.DateTimeField()),
                ("purpose", models.CharField(max_length=64)),
                ("txid", models.BigIntegerField(blank=True, null=True)),
                ("witness_n", models.PositiveBigIntegerField()),
                ("body", models.JSONField()),
            ],
            options={"ordering": ["-id"]},
        ),
        migrations.RunPython(install, migrations.RunPython.noop),
        migrations.DeleteModel(name="AuditMaintenance"),
        migrations.RunPython(roles_follow, migrations.RunPython.noop),
    ]
