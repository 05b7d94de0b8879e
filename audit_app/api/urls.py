"""/v1 routes of the audit trail."""

from django.urls import path

from audit_app.api import views

urlpatterns = [
    path("audit/injections", views.InjectionListView.as_view(), name="audit-injections"),
    path("audit/verify", views.AuditVerifyView.as_view(), name="audit-verify"),
    path(
        "audit/injections/<int:record_id>",
        views.InjectionDetailView.as_view(),
        name="audit-injection",
    ),
    path(
        "graph/audit/contradictions",
        views.ContradictionAuditView.as_view(),
        name="graph-audit-contradictions",
    ),
]
