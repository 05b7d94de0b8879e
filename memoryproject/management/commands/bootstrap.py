"""First-run credentials: `python manage.py bootstrap` (idempotent; `make run` calls it)."""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from memoryproject.services import bootstrap_first_run


class Command(BaseCommand):
    help = (
        "When no superuser exists, create an 'admin' account with a random password and a write "
        "API key for the default project, and print both once. Otherwise change nothing."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        result = bootstrap_first_run(default_project=settings.MEMORY_DEFAULT_PROJECT)
        if not result.created:
            self.stdout.write("bootstrap: a superuser already exists; nothing changed.")
            return
        bar = "=" * 68
        self.stdout.write(
            "\n".join(
                [
                    bar,
                    "memoryproject first run: save these now, they are shown only once.",
                    "  admin console : http://127.0.0.1:8000/admin/",
                    f"  username      : {result.username}",
                    f"  password      : {result.password}",
                    f"  API key       : {result.api_key}",
                    f"                  (scope write, project '{settings.MEMORY_DEFAULT_PROJECT}';"
                    " send as 'Authorization: Bearer <key>')",
                    bar,
                ]
            )
        )
