from django.apps import AppConfig


class MemoryProjectConfig(AppConfig):
    name = "memoryproject"
    verbose_name = "Projects and API keys"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from memoryproject.roles import ensure_roles_after_migrate

        post_migrate.connect(ensure_roles_after_migrate, sender=self, dispatch_uid="roles")
