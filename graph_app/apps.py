from collections.abc import Sequence

from django.apps import AppConfig


def _compiler_warm(projects: Sequence[str] | None) -> None:
    from graph_app.index_cache import compiler_warm
    from memoryproject.models import Project

    if projects is None:
        compiler_warm()
    else:
        compiler_warm(projects=Project.objects.filter(slug__in=projects).order_by("pk"))


class GraphAppConfig(AppConfig):
    name = "graph_app"
    verbose_name = "Knowledge graph"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memoryproject.warmup import warmer_register

        warmer_register(_compiler_warm)
