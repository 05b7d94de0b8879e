from django.apps import AppConfig
from django.db.backends.signals import connection_created


class AuditAppConfig(AppConfig):
    name = "audit_app"
    verbose_name = "Compliance and audit"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from audit_app import checks  # noqa: F401  (registers the retention check)
        from audit_app.finding_selectors import open_findings_of_facts
        from audit_app.injection_log import injection_log_append
        from audit_app.quarantine import quarantine_hold, quarantine_released
        from audit_app.reviews import review_claim, review_delivered, review_open
        from memoryproject.append_only import gate_function_install
        from memoryproject.compliance import Compliance, compliance_register
        from memoryproject.quarantine import quarantine_register

        quarantine_register(released=quarantine_released, hold=quarantine_hold)
        compliance_register(
            Compliance(
                receipt_append=injection_log_append,
                review_open=review_open,
                review_claim=review_claim,
                review_delivered=review_delivered,
                open_findings_of_facts=open_findings_of_facts,
            )
        )

        # Before any connection is made: SQLite's append-only triggers call the gate function.
        connection_created.connect(gate_function_install, dispatch_uid="audit_gate_function")
