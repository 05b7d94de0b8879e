"""Request shapes (for parsing and the OpenAPI schema) and response shapes of /v1/graph.

Requests are only type-checked here; the services apply every rule, so REST and MCP callers get
the same errors. Responses are the selectors' dicts as they are.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from graph_app.models import Entity, Episode, EpisodeCategory, TemporalFact
from graph_app.selectors import entity_as_dict, episode_as_dict, fact_as_dict


class FactUpsertSerializer(serializers.Serializer):
    project = serializers.CharField(required=False, allow_blank=True)
    subject_id = serializers.CharField(
        allow_blank=True, trim_whitespace=False, help_text="Subject entity id, e.g. auth_service"
    )
    predicate = serializers.CharField(allow_blank=True, help_text="e.g. uses_token_format")
    object_value = serializers.CharField(
        required=False, allow_blank=True, allow_null=True, help_text="The object, as text"
    )
    object_entity = serializers.CharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        help_text="Entity id when the object is itself an entity (makes the fact an edge)",
    )
    singular = serializers.BooleanField(
        default=True, help_text="One value at a time: a new value supersedes the active one"
    )
    valid_from = serializers.CharField(
        required=False, allow_null=True, help_text="ISO-8601 with timezone; default now"
    )
    source_episode = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    confidence = serializers.FloatField(default=1.0)


class EntityUpsertSerializer(serializers.Serializer):
    project = serializers.CharField(required=False, allow_blank=True)
    entity_id = serializers.CharField(allow_blank=True, help_text="e.g. payment_ledger")
    kind = serializers.CharField(
        required=False, allow_null=True, help_text="service, module, file, library, person, ..."
    )
    name = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    aliases = serializers.ListField(
        child=serializers.CharField(allow_blank=True), required=False, allow_null=True
    )


class FactRetractSerializer(serializers.Serializer):
    project = serializers.CharField(required=False, allow_blank=True)
    at = serializers.CharField(
        required=False, allow_null=True, help_text="End of validity (ISO-8601); default now"
    )


class EpisodeRecordSerializer(serializers.Serializer):
    project = serializers.CharField(required=False, allow_blank=True)
    title = serializers.CharField(allow_blank=True, trim_whitespace=False)
    category = serializers.CharField(
        allow_blank=True, help_text="One of " + ", ".join(EpisodeCategory.values)
    )
    content = serializers.CharField(allow_blank=True, trim_whitespace=False)
    files_touched = serializers.ListField(
        child=serializers.CharField(allow_blank=True), required=False
    )
    entities_mentioned = serializers.ListField(
        child=serializers.CharField(allow_blank=True), required=False
    )
    occurred_at = serializers.CharField(required=False, allow_null=True)
    external_id = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    metadata = serializers.JSONField(
        required=False, help_text='JSON object, e.g. {"speaker": "...", "session": "..."}'
    )


class _DictOut(serializers.Serializer):
    """Answers the selector's dict; the declared fields only document it."""

    def to_representation(self, instance: Any) -> Any:
        return self.as_dict(instance)

    def as_dict(self, instance: Any) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError


class FactSerializer(_DictOut):
    id = serializers.CharField()
    project = serializers.CharField()
    subject = serializers.CharField()
    predicate = serializers.CharField()
    object_value = serializers.CharField()
    object_entity = serializers.CharField(allow_null=True)
    singular = serializers.BooleanField()
    confidence = serializers.FloatField()
    valid_from = serializers.DateTimeField()
    valid_until = serializers.DateTimeField(allow_null=True)
    recorded_at = serializers.DateTimeField()
    closed_at = serializers.DateTimeField(allow_null=True)
    superseded_by = serializers.CharField(allow_null=True)
    source_episode = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=["active", "superseded", "retracted"])
    sha256 = serializers.CharField()
    revision = serializers.IntegerField()

    def as_dict(self, instance: TemporalFact) -> dict[str, Any]:
        return fact_as_dict(instance)


class EpisodeSerializer(_DictOut):
    id = serializers.CharField()
    project = serializers.CharField()
    category = serializers.ChoiceField(choices=EpisodeCategory.values)
    title = serializers.CharField()
    content = serializers.CharField()
    files_touched = serializers.ListField(child=serializers.CharField())
    entities_mentioned = serializers.ListField(child=serializers.CharField())
    metadata = serializers.JSONField()
    occurred_at = serializers.DateTimeField()
    recorded_at = serializers.DateTimeField()
    external_id = serializers.CharField(allow_null=True)
    sha256 = serializers.CharField()
    revision = serializers.IntegerField()

    def as_dict(self, instance: Episode) -> dict[str, Any]:
        return episode_as_dict(instance)


class EntitySerializer(_DictOut):
    id = serializers.CharField()
    kind = serializers.CharField()
    name = serializers.CharField()
    aliases = serializers.ListField(child=serializers.CharField())
    created_at = serializers.DateTimeField()

    def as_dict(self, instance: Entity) -> dict[str, Any]:
        return entity_as_dict(instance)


class FactUpsertResultSerializer(serializers.Serializer):
    fact = FactSerializer()
    created = serializers.BooleanField()
    outcome = serializers.ChoiceField(choices=["active", "history", "unchanged"])
    superseded = FactSerializer(many=True)


class EpisodeRecordResultSerializer(EpisodeSerializer):
    created = serializers.BooleanField()


class EntityQueryResultSerializer(serializers.Serializer):
    entity = EntitySerializer()
    facts = FactSerializer(many=True)
    history = FactSerializer(many=True)
    episodes = EpisodeSerializer(many=True)
    ego_graph = serializers.DictField()


class TimeTravelResultSerializer(serializers.Serializer):
    project = serializers.CharField()
    as_of = serializers.DateTimeField()
    known_at = serializers.DateTimeField()
    count = serializers.IntegerField()
    snapshot_hash = serializers.CharField()
    facts = FactSerializer(many=True)


class IntegrityResultSerializer(serializers.Serializer):
    project = serializers.CharField()
    verified = serializers.BooleanField()
    facts = serializers.IntegerField()
    episodes = serializers.IntegerField()
    records = serializers.IntegerField()
    merkle_root = serializers.CharField()
    mismatched_ids = serializers.ListField(child=serializers.CharField())
    mismatches = serializers.ListField(child=serializers.DictField())
    checked_at = serializers.DateTimeField()
