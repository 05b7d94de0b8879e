"""`python manage.py create_project SLUG [--name NAME]`: the explicit way to create a project.

Nothing else creates one implicitly: an API key, ``mcp_serve`` or ``save_session`` naming a
project that does not exist answers an error pointing here. Running it again for an existing
project changes nothing and says so (exit 0).
"""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memoryproject.errors import ApplicationError
from memoryproject.services import project_create


class Command(BaseCommand):
    help = "Create a project (lower-case letters, digits, '-', '_' and '.'); idempotent."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the project's slug, e.g. my-service")
        parser.add_argument("--name", default="", help="a display name (default: the slug)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            project, created = project_create(slug=options["slug"], name=options["name"])
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        if created:
            self.stdout.write(f"Created project '{project.slug}'.")
        else:
            self.stdout.write(f"Project '{project.slug}' already exists; nothing changed.")
