from django.apps import AppConfig


class AuditAppConfig(AppConfig):
    name = "audit_app"
    verbose_name = "Compliance and audit"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from audit_app import checks  # noqa: F401  (registers the retention check)
