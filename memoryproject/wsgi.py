"""WSGI entry point (served by ``python -m memoryproject.server``)."""

import os

from django.core.wsgi import get_wsgi_application

from memoryproject.drf_compat import drf_compat_load

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryproject.settings")
application = get_wsgi_application()
# Before the URL map imports DRF's views (on SQLite without the PostgreSQL driver).
drf_compat_load()
