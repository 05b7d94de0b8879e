"""Work on a thread of its own, as a second client would do it: its exceptions are collected
(an exception in a thread is otherwise lost) and its database connections closed when it ends."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections

from memoryproject.models import Project


def in_background(work: Callable[[], Any]) -> tuple[threading.Thread, list[BaseException]]:
    """Starts ``work`` on a new thread; answers the thread and the list its exception goes to."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # collected for the test to assert on
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


@contextmanager
def committed_project(slug: str) -> Iterator[Project]:
    """A project for tests whose writes really commit (``transaction=True``), so that other
    threads see them; its receipts, which the end-of-test flush may not delete, go with it."""
    from audit_app.models import InjectionRecord, audit_maintenance
    from audit_app.receipt_sources import ReceiptSource

    project = Project.objects.create(slug=slug, name=slug)
    try:
        yield project
    finally:
        with audit_maintenance():
            ReceiptSource.objects.filter(record__project=project).delete()
            InjectionRecord.objects.filter(project=project).delete()
