from django.apps import AppConfig


class MemoryProjectConfig(AppConfig):
    name = "memoryproject"
    verbose_name = "Projects and API keys"
    default_auto_field = "django.db.models.BigAutoField"
