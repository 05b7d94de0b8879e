from django.db import migrations


def create_default(apps, schema_editor):
    Project = apps.get_model("memoryproject", "Project")
    Project.objects.get_or_create(slug="default", defaults={"name": "Default project"})


class Migration(migrations.Migration):
    dependencies = [("memoryproject", "0001_initial")]

    operations = [migrations.RunPython(create_default, migrations.RunPython.noop)]
