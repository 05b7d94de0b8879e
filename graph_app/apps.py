from django.apps import AppConfig


def _compiler_warm() -> None:
    from graph_app.index_cache import compiler_warm

    compiler_warm()


class GraphAppConfig(AppConfig):
    name = "graph_app"
    verbose_name = "Knowledge graph"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memoryproject.warmup import warmer_register

        warmer_register(_compiler_warm)
