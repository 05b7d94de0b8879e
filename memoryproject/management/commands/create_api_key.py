"""`python manage.py create_api_key --name N --project P [--project Q] --scope S`."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memoryproject.errors import ApplicationError
from memoryproject.models import Scope
from memoryproject.services import api_key_create


class Command(BaseCommand):
    help = "Create an API key bound to one or more projects; the key is printed once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="a label for the key (who uses it)")
        parser.add_argument(
            "--project", action="append", required=True, help="project slug (repeatable)"
        )
        parser.add_argument("--scope", choices=Scope.values, default=Scope.READ)
        parser.add_argument(
            "--create-projects", action="store_true", help="create projects that do not exist"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            api_key, key = api_key_create(
                name=options["name"],
                project_slugs=options["project"],
                scope=options["scope"],
                create_projects=options["create_projects"],
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        self.stderr.write(
            f"Created API key '{api_key.name}' (prefix {api_key.prefix}, scope {api_key.scope}, "
            f"projects {', '.join(options['project'])}). It is shown only this once:"
        )
        self.stdout.write(key)
