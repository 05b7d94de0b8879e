"""Shapes of the session-memory API for the OpenAPI schema.

Validation lives in sessions_app.services (so MCP callers get the same rules); these serializers
describe requests and responses for /v1/docs and render listed traces.
"""

from __future__ import annotations

from rest_framework import serializers

from memoryproject.timeutil import iso
from sessions_app.models import Trace


class TraceSerializer(serializers.ModelSerializer):
    trace_id = serializers.UUIDField(read_only=True)
    project: serializers.SlugRelatedField = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    created_at = serializers.SerializerMethodField()

    class Meta:
        model = Trace
        fields = [
            "trace_id",
            "project",
            "created_at",
            "model",
            "policy",
            "decision",
            "trust_score",
            "risk",
            "status_code",
            "metadata",
        ]

    def get_created_at(self, obj: Trace) -> str | None:
        return iso(obj.created_at)


class TraceCreateRequest(serializers.Serializer):
    project = serializers.CharField(required=False)
    trace_id = serializers.UUIDField(required=False)
    created_at = serializers.DateTimeField(required=False)
    model = serializers.CharField(required=False)
    policy = serializers.CharField(required=False)
    decision = serializers.ChoiceField(choices=["PASS", "REFINE", "ESCALATE"], required=False)
    trust_score = serializers.FloatField(required=False, min_value=0, max_value=1)
    risk = serializers.FloatField(required=False, min_value=0, max_value=1)
    status_code = serializers.IntegerField(required=False, min_value=100, max_value=599)
    active_project = serializers.CharField(required=False)
    last_decision = serializers.CharField(required=False)
    current_output = serializers.CharField(required=False)
    open_questions = serializers.ListField(child=serializers.CharField(), required=False)
    key_files = serializers.ListField(child=serializers.CharField(), required=False)
    metadata = serializers.DictField(required=False)


class TrustSignalsSerializer(serializers.Serializer):
    p = serializers.FloatField()
    ue = serializers.FloatField()
    ua = serializers.FloatField()
    total_uncertainty = serializers.FloatField()


class PlanRequest(serializers.Serializer):
    n = serializers.IntegerField(required=False, default=5, min_value=1, max_value=50)
    trust_threshold = serializers.FloatField(required=False, default=0.75, min_value=0, max_value=1)
    mode = serializers.ChoiceField(choices=["auto", "force", "dry_run"], required=False)
    project = serializers.CharField(required=False)


class PlanContextSerializer(serializers.Serializer):
    active_project = serializers.CharField()
    last_decision = serializers.CharField()
    open_questions = serializers.ListField(child=serializers.CharField())
    current_output = serializers.CharField()
    recent_models = serializers.ListField(child=serializers.CharField())


class PlanResponse(serializers.Serializer):
    status = serializers.ChoiceField(choices=["injected", "flagged", "empty"])
    mode = serializers.CharField()
    dry_run = serializers.BooleanField()
    would_inject = serializers.BooleanField(required=False, help_text="dry_run only")
    project = serializers.CharField()
    trust_score = serializers.FloatField()
    confidence = serializers.FloatField()
    risk = serializers.FloatField()
    decision = serializers.ChoiceField(choices=["PASS", "REFINE", "ESCALATE"])
    threshold = serializers.FloatField()
    signals = TrustSignalsSerializer()
    # A declared field named like Serializer.context: the metaclass moves it to _declared_fields.
    context = PlanContextSerializer()  # type: ignore[assignment]
    system_prompt = serializers.CharField(required=False, help_text="when injected")
    flagged_reason = serializers.CharField(required=False, help_text="when flagged or empty")
    trace_ids = serializers.ListField(child=serializers.CharField())
    generated_at = serializers.CharField()
    injection_id = serializers.IntegerField()


class SaveRequest(serializers.Serializer):
    summary = serializers.CharField()
    project = serializers.CharField(required=False)


class SaveResponse(serializers.Serializer):
    trace_id = serializers.UUIDField()
    project = serializers.CharField()
    trust_score = serializers.FloatField()
    confidence = serializers.FloatField()
    risk = serializers.FloatField()
    decision = serializers.CharField()
    tokens = serializers.IntegerField()
    signals = serializers.DictField()
    saved_at = serializers.CharField()


class LoadResponse(serializers.Serializer):
    found = serializers.BooleanField()
    project = serializers.CharField()
    reason = serializers.CharField(required=False, help_text="when not found")
    rule = serializers.ChoiceField(
        choices=["none", "max_age", "threshold"], required=False, help_text="when not found"
    )
    trace_id = serializers.UUIDField(required=False)
    summary = serializers.CharField(required=False)
    trust_score = serializers.FloatField(required=False)
    confidence = serializers.FloatField(required=False)
    risk = serializers.FloatField(required=False)
    decision = serializers.CharField(required=False)
    tokens = serializers.IntegerField(required=False)
    signals = serializers.DictField(required=False)
    saved_at = serializers.CharField(required=False)
    threshold = serializers.FloatField()
    max_age_days = serializers.IntegerField()
    system_prompt = serializers.CharField(required=False, help_text="the SESSION_CONTEXT block")
    generated_at = serializers.CharField(required=False)
    injection_id = serializers.IntegerField(required=False)
