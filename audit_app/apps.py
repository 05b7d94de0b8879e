from django.apps import AppConfig
from django.db.backends.signals import connection_created


class AuditAppConfig(AppConfig):
    name = "audit_app"
    verbose_name = "Compliance and audit"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from audit_app import checks  # noqa: F401  (registers the retention check)
        from audit_app.gate import gate_function_install
        from audit_app.quarantine import quarantine_hold, quarantine_released
        from memoryproject.quarantine import quarantine_register

        quarantine_register(released=quarantine_released, hold=quarantine_hold)

        # Before any connection is made: SQLite's append-only triggers call the gate function.
        connection_created.connect(gate_function_install, dispatch_uid="audit_gate_function")
