"""Factories for graph rows. They go through the services, so every row is hashed, stamped
with a revision and placed in its supersession chain exactly as in production."""

from __future__ import annotations

from typing import Any

import factory

from graph_app.entity_writes import entity_upsert
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.models import Entity, Episode, TemporalFact
from memoryproject.models import Project


def _default_project() -> Project:
    return Project.objects.get_or_create(slug="default", defaults={"name": "default"})[0]


class FactFactory(factory.Factory):
    class Meta:
        model = TemporalFact

    project = factory.LazyFunction(_default_project)
    subject_id = factory.Sequence(lambda n: f"service_{n}")
    predicate = "depends_on"
    object_value = factory.Sequence(lambda n: f"value_{n}")
    singular = True

    @classmethod
    def _create(cls, model_class: type, *args: Any, **kwargs: Any) -> TemporalFact:
        result = fact_upsert(**kwargs)
        return TemporalFact.objects.get(pk=result["fact"]["id"])


class EpisodeFactory(factory.Factory):
    class Meta:
        model = Episode

    project = factory.LazyFunction(_default_project)
    title = factory.Sequence(lambda n: f"Decision {n}")
    category = "adr"
    content = factory.Faker("paragraph")
    files_touched: list[str] = []
    entities_mentioned: list[str] = []

    @classmethod
    def _create(cls, model_class: type, *args: Any, **kwargs: Any) -> Episode:
        result = episode_record(**kwargs)
        return Episode.objects.get(pk=result["id"])


class EntityFactory(factory.Factory):
    class Meta:
        model = Entity

    project = factory.LazyFunction(_default_project)
    entity_id = factory.Sequence(lambda n: f"entity_{n}")
    kind = "service"

    @classmethod
    def _create(cls, model_class: type, *args: Any, **kwargs: Any) -> Entity:
        result = entity_upsert(**kwargs)
        return Entity.objects.get(project=kwargs["project"], slug=result["id"])
