# The "Compliance officer" group: view on the audit, session and graph models, export of the
# injection log, and review decisions; nothing else (see memoryproject.roles).

from django.db import migrations


def create_group(apps, schema_editor):
    from memoryproject.roles import compliance_officer_group_ensure

    compliance_officer_group_ensure(apps, replace=True)


def remove_group(apps, schema_editor):
    from memoryproject.roles import COMPLIANCE_OFFICER

    apps.get_model("auth", "Group").objects.filter(name=COMPLIANCE_OFFICER).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("memoryproject", "0002_default_project"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("audit_app", "0006_review_queue"),
        ("graph_app", "0004_change_log"),
        ("sessions_app", "0001_initial"),
    ]

    operations = [migrations.RunPython(create_group, remove_group)]
