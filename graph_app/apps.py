from django.apps import AppConfig


class GraphAppConfig(AppConfig):
    name = "graph_app"
    verbose_name = "Knowledge graph"
    default_auto_field = "django.db.models.BigAutoField"
