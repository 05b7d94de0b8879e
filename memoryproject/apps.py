from collections.abc import Sequence

from django.apps import AppConfig


def _screening_warm(projects: Sequence[str] | None) -> None:
    """Secret screening's rules compiled (detect-secrets' provider formats imported with
    them, 40 to 55 ms), so that a server's first screened text, often the query of an agent's
    first compile, does not wait for them; in the REST API's main process, before its workers
    fork."""
    from memoryproject.domain.screening_secrets import secret_rules

    secret_rules()


class MemoryProjectConfig(AppConfig):
    name = "memoryproject"
    verbose_name = "Projects and API keys"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from memoryproject.admin_discovery import discover_at_start
        from memoryproject.roles import ensure_roles_after_migrate
        from memoryproject.warmup import warmer_register

        post_migrate.connect(ensure_roles_after_migrate, sender=self, dispatch_uid="roles")
        warmer_register(_screening_warm)
        discover_at_start()
