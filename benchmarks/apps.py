from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    """Installed for its management commands only: it has no models and serves no request."""

    name = "benchmarks"
    verbose_name = "Benchmarks"
