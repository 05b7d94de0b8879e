"""The graph's hash-chained change log: its table, the head kept on GraphRevision, a baseline
entry sealing every record that already exists (as found, with the hash its row stores), and
the triggers that make the log append-only on SQLite and PostgreSQL (UPDATE, DELETE and, on
PostgreSQL, TRUNCATE refused unless the audit maintenance gate is open in the same
transaction). A later migration that rebuilds the table on SQLite drops its triggers: it must
install them again."""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

from graph_app.domain.records import change_hash, entity_canonical, sha256_of

GENESIS_HASH = "0" * 64
TABLE = "graph_app_graphchange"
#: The audit log's maintenance gate (audit_app migration 0003): SQLite's one-row switch table,
#: PostgreSQL's transaction-local setting.
SWITCH = "audit_app_auditmaintenance"

SQLITE_UP = [
    f"CREATE TRIGGER graph_change_no_{op.lower()} BEFORE {op} ON {TABLE} "
    f"WHEN NOT COALESCE((SELECT enabled FROM {SWITCH} WHERE id = 1), 0) "
    f"BEGIN SELECT RAISE(ABORT, '{TABLE} is append-only: {op} refused'); END"
    for op in ("UPDATE", "DELETE")
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS graph_change_no_update",
    "DROP TRIGGER IF EXISTS graph_change_no_delete",
]
POSTGRES_UP = [
    """
    CREATE OR REPLACE FUNCTION graph_change_append_only() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF coalesce(current_setting('app.audit_maintenance', true), '') = 'on' THEN
            IF TG_OP = 'UPDATE' THEN
                RETURN NEW;
            END IF;
            RETURN OLD;
        END IF;
        RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
            USING ERRCODE = 'restrict_violation';
    END
    $$
    """,
    f"CREATE TRIGGER graph_change_no_update_delete BEFORE UPDATE OR DELETE ON {TABLE} "
    "FOR EACH ROW EXECUTE FUNCTION graph_change_append_only()",
    f"CREATE TRIGGER graph_change_no_truncate BEFORE TRUNCATE ON {TABLE} "
    "FOR EACH STATEMENT EXECUTE FUNCTION graph_change_append_only()",
]
POSTGRES_DOWN = [
    f"DROP TRIGGER IF EXISTS graph_change_no_update_delete ON {TABLE}",
    f"DROP TRIGGER IF EXISTS graph_change_no_truncate ON {TABLE}",
    "DROP FUNCTION IF EXISTS graph_change_append_only()",
]


def _run(schema_editor: Any, statements: list[str]) -> None:
    for sql in statements:
        schema_editor.execute(sql, params=None)


def triggers_install(apps: Any, schema_editor: Any) -> None:
    vendor = schema_editor.connection.vendor
    _run(schema_editor, POSTGRES_UP if vendor == "postgresql" else SQLITE_UP)


def triggers_remove(apps: Any, schema_editor: Any) -> None:
    vendor = schema_editor.connection.vendor
    _run(schema_editor, POSTGRES_DOWN if vendor == "postgresql" else SQLITE_DOWN)


def _records(apps: Any, project: Any, revision: int) -> list[tuple[str, str, str, int]]:
    """The project's records as (type, id, hash, revision): entities by creation (at the
    project's ``revision``: they carry none), then episodes and facts as recorded, at their
    own. Facts and episodes keep the hash their row stores, so a row already changed behind
    the application's back stays a mismatch."""
    entity_model = apps.get_model("graph_app", "Entity")
    episode_model = apps.get_model("graph_app", "Episode")
    fact_model = apps.get_model("graph_app", "TemporalFact")
    records = []
    for entity in entity_model.objects.filter(project=project).order_by("created_at", "id"):
        form = entity_canonical(
            id=entity.slug,
            project=project.slug,
            kind=entity.kind,
            name=entity.name,
            aliases=entity.aliases or [],
            created_at=entity.created_at,
        )
        records.append(("entity", entity.slug, sha256_of(form), revision))
    for kind, model in (("episode", episode_model), ("fact", fact_model)):
        rows = model.objects.filter(project=project).order_by("recorded_at", "id")
        values = rows.values_list("id", "sha256", "revision")
        records += [(kind, pk, sha, stamp) for pk, sha, stamp in values]
    return records


def baseline_seal(apps: Any, schema_editor: Any) -> None:
    """Seals the records that exist when the change log begins, one baseline entry each."""
    from django.utils import timezone

    project_model = apps.get_model("memoryproject", "Project")
    change_model = apps.get_model("graph_app", "GraphChange")
    revision_model = apps.get_model("graph_app", "GraphRevision")
    now = timezone.now()
    for project in project_model.objects.order_by("id"):
        current = revision_model.objects.filter(project=project).values_list("revision", flat=True)
        records = _records(apps, project, current.first() or 0)
        if not records:
            continue
        head_row, _ = revision_model.objects.get_or_create(project=project)
        head, changes = GENESIS_HASH, []
        for seq, (kind, pk, sha, revision) in enumerate(records, start=1):
            fields = {
                "seq": seq,
                "revision": revision,
                "action": "baseline",
                "record_type": kind,
                "record_id": pk,
                "record_sha256": sha,
                "erased_sha256": "",
                "note": "",
                "recorded_at": now,
                "prev_hash": head,
            }
            head = change_hash(project=project.slug, **fields)
            changes.append(change_model(project=project, hash=head, **fields))
        change_model.objects.bulk_create(changes, batch_size=2000)
        head_row.changes, head_row.head_hash = len(records), head
        head_row.save(update_fields=["changes", "head_hash"])


class Migration(migrations.Migration):
    dependencies = [
        ("graph_app", "0003_superseded_not_zero_width"),
        ("memoryproject", "0002_default_project"),
        ("audit_app", "0003_append_only_log"),  # the maintenance gate the triggers read
    ]

    operations = [
        migrations.AddField(
            model_name="graphrevision",
            name="changes",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="graphrevision",
            name="head_hash",
            field=models.CharField(default=GENESIS_HASH, max_length=64),
        ),
        migrations.CreateModel(
            name="GraphChange",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("seq", models.PositiveBigIntegerField()),
                ("revision", models.BigIntegerField()),
                (
                    "action",
                    models.CharField(
                        choices=[
                            ("asserted", "fact asserted"),
                            ("closed", "fact closed (superseded, retracted or cancelled)"),
                            ("recorded", "episode recorded"),
                            ("created", "entity created"),
                            ("changed", "entity changed"),
                            ("erased", "content erased"),
                            ("baseline", "sealed as found when the change log began"),
                        ],
                        max_length=16,
                    ),
                ),
                (
                    "record_type",
                    models.CharField(
                        choices=[("fact", "Fact"), ("episode", "Episode"), ("entity", "Entity")],
                        max_length=8,
                    ),
                ),
                ("record_id", models.CharField(max_length=128)),
                ("record_sha256", models.CharField(max_length=64)),
                ("erased_sha256", models.CharField(blank=True, max_length=64)),
                ("note", models.TextField(blank=True)),
                ("recorded_at", models.DateTimeField()),
                ("prev_hash", models.CharField(max_length=64)),
                ("hash", models.CharField(max_length=64)),
                (
                    "project",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="graph_changes",
                        to="memoryproject.project",
                    ),
                ),
            ],
            options={
                "ordering": ["project_id", "seq"],
                "indexes": [
                    models.Index(
                        fields=["project", "record_type", "record_id"], name="graph_change_record"
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("project", "seq"), name="graph_change_unique_seq"
                    )
                ],
            },
        ),
        migrations.RunPython(baseline_seal, migrations.RunPython.noop, elidable=False),
        migrations.RunPython(triggers_install, triggers_remove),
    ]
