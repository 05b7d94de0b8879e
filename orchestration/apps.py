from django.apps import AppConfig


class OrchestrationConfig(AppConfig):
    name = "orchestration"
    verbose_name = "Orchestration"
    default_auto_field = "django.db.models.BigAutoField"
