"""Names vulture reports as unused that the frameworks, templates or tests use.

``make lint`` runs vulture over the applications with this file; a name reported there that is
not listed here is new dead code: delete it, or add it here under the reason that keeps it.
"""

# ruff: noqa
# mypy: ignore-errors

_ = object()

# Django settings and the gunicorn configuration, read by name by the frameworks
forwarded_allow_ips  # memoryproject/gunicorn_conf.py
graceful_timeout  # memoryproject/gunicorn_conf.py
keepalive  # memoryproject/gunicorn_conf.py
reuse_port  # memoryproject/gunicorn_conf.py
secure_scheme_headers  # memoryproject/gunicorn_conf.py
when_ready  # memoryproject/gunicorn_conf.py
worker_class  # memoryproject/gunicorn_conf.py
ASGI_APPLICATION  # memoryproject/settings.py
AUTHENTICATION_BACKENDS  # memoryproject/settings.py
AUTH_PASSWORD_VALIDATORS  # memoryproject/settings.py
AXES_CACHE  # memoryproject/settings.py
AXES_DISABLE_ACCESS_LOG  # memoryproject/settings.py
AXES_ENABLE_ADMIN  # memoryproject/settings.py
AXES_HANDLER  # memoryproject/settings.py
AXES_IPWARE_META_PRECEDENCE_ORDER  # memoryproject/settings.py
AXES_LOCKOUT_CALLABLE  # memoryproject/settings.py
AXES_LOCKOUT_PARAMETERS  # memoryproject/settings.py
AXES_RESET_ON_SUCCESS  # memoryproject/settings.py
AXES_VERBOSE  # memoryproject/settings.py
BOOLEAN_TRUE_STRINGS  # memoryproject/settings.py
CACHES  # memoryproject/settings.py
CSRF_COOKIE_SECURE  # memoryproject/settings.py
CSRF_TRUSTED_ORIGINS  # memoryproject/settings.py
DEFAULT_AUTO_FIELD  # memoryproject/settings.py
IMPORT_EXPORT_ESCAPE_FORMULAE_ON_EXPORT  # memoryproject/settings.py
IMPORT_EXPORT_EXPORT_PERMISSION_CODE  # memoryproject/settings.py
INSTALLED_APPS  # memoryproject/settings.py
LANGUAGE_CODE  # memoryproject/settings.py
LOGGING  # memoryproject/settings.py
MEMORY_UMASK  # memoryproject/settings.py
MIDDLEWARE  # memoryproject/settings.py
REST_FRAMEWORK  # memoryproject/settings.py
ROOT_URLCONF  # memoryproject/settings.py
SECURE_CONTENT_TYPE_NOSNIFF  # memoryproject/settings.py
SECURE_HSTS_INCLUDE_SUBDOMAINS  # memoryproject/settings.py
SECURE_HSTS_PRELOAD  # memoryproject/settings.py
SECURE_HSTS_SECONDS  # memoryproject/settings.py
SECURE_REDIRECT_EXEMPT  # memoryproject/settings.py
SECURE_SSL_REDIRECT  # memoryproject/settings.py
SESSION_COOKIE_HTTPONLY  # memoryproject/settings.py
SESSION_COOKIE_SECURE  # memoryproject/settings.py
SPECTACULAR_SETTINGS  # memoryproject/settings.py
STATIC_ROOT  # memoryproject/settings.py
STATIC_URL  # memoryproject/settings.py
TIME_ZONE  # memoryproject/settings.py
USE_I18N  # memoryproject/settings.py
USE_TZ  # memoryproject/settings.py
WHITENOISE_USE_FINDERS  # memoryproject/settings.py
WSGI_APPLICATION  # memoryproject/settings.py
X_FRAME_OPTIONS  # memoryproject/settings.py
PASSWORD_HASHERS  # memoryproject/settings_test.py

# Admin classes (registered by decorator) and their options, actions and list cells
AuditRunAdmin  # audit_app/admin.py
ContradictionFindingAdmin  # audit_app/admin.py
_.save_model  # audit_app/admin.py
admin_log  # audit_app/admin.py
admin_reviews  # audit_app/admin.py
list_select_related  # audit_app/admin.py
search_fields  # audit_app/admin.py
_.created_cell  # audit_app/admin_log.py
_.expected_parameters  # audit_app/admin_log.py
_.generated_cell  # audit_app/admin_log.py
_.get_search_results  # audit_app/admin_log.py
_.has_output  # audit_app/admin_log.py
_.item_links  # audit_app/admin_log.py
_.trace_links  # audit_app/admin_log.py
change_form_template  # audit_app/admin_log.py
change_list_template  # audit_app/admin_log.py
export_form_class  # audit_app/admin_log.py
formats  # audit_app/admin_log.py
list_display_links  # audit_app/admin_log.py
list_per_page  # audit_app/admin_log.py
ordering  # audit_app/admin_log.py
resource_classes  # audit_app/admin_log.py
search_help_text  # audit_app/admin_log.py
_.delivered_receipt  # audit_app/admin_reviews.py
_.flagged_receipt  # audit_app/admin_reviews.py
_.short_reason  # audit_app/admin_reviews.py
_.signals_shown  # audit_app/admin_reviews.py
_.sources_shown  # audit_app/admin_reviews.py
_.text_shown  # audit_app/admin_reviews.py
EntityAdmin  # graph_app/admin.py
EpisodeAdmin  # graph_app/admin.py
GraphChangeAdmin  # graph_app/admin.py
TemporalFactAdmin  # graph_app/admin.py
_.recorded_cell  # graph_app/admin.py
_.status_label  # graph_app/admin.py
_.valid_from_cell  # graph_app/admin.py
_.valid_until_cell  # graph_app/admin.py
_.view_on_site  # graph_app/admin.py
date_hierarchy  # graph_app/admin.py
ProjectAPIKeyAdmin  # memoryproject/admin.py
ProjectAdmin  # memoryproject/admin.py
_.client_masked  # memoryproject/admin.py
_.has_add_permission  # memoryproject/admin.py
_.project_list  # memoryproject/admin.py
_.revoke_keys  # memoryproject/admin.py
_.site_header  # memoryproject/admin.py
_.site_title  # memoryproject/admin.py
actions  # memoryproject/admin.py
filter_horizontal  # memoryproject/admin.py
SessionSummaryAdmin  # sessions_app/admin.py
TraceAdmin  # sessions_app/admin.py

# Model fields, Meta options and choices (read by the ORM, migrations and templates)
abstract  # audit_app/models.py
constraints  # audit_app/models.py
decided_at  # audit_app/models.py
decision_reason  # audit_app/models.py
decision_seq  # audit_app/models.py
delivered_at  # audit_app/models.py
finished_at  # audit_app/models.py
first_run  # audit_app/models.py
last_seen_run  # audit_app/models.py
ordering  # audit_app/models.py
proxy  # audit_app/models.py
settled_at  # audit_app/models.py
txid  # audit_app/models.py
verbose_name_plural  # audit_app/models.py
witness_n  # audit_app/models.py
BASELINE  # graph_app/models/changes.py
ADR  # graph_app/models/episodes.py
BUG_ROOT_CAUSE  # graph_app/models/episodes.py
INCIDENT  # graph_app/models/episodes.py
INVARIANT  # graph_app/models/episodes.py
MIGRATION  # graph_app/models/episodes.py
SESSION_NOTE  # graph_app/models/episodes.py

# Management commands: the Command class Django loads by name, help, add_arguments and
# system-check options
Command  # */management/commands/*.py
_.add_arguments  # audit_app/management/commands/audit_checkpoint.py
help  # audit_app/management/commands/audit_checkpoint.py
requires_system_checks  # graph_app/management/commands/verify_sources.py

# URL configurations, WSGI/ASGI applications and app configs
urlpatterns  # audit_app/api/urls.py
AuditAppConfig  # audit_app/apps.py
_.ready  # audit_app/apps.py
default_auto_field  # audit_app/apps.py
app_name  # audit_app/console/urls.py
GraphAppConfig  # graph_app/apps.py
MemoryProjectConfig  # memoryproject/apps.py
application  # memoryproject/asgi.py
SessionsAppConfig  # sessions_app/apps.py
OrchestrationConfig  # orchestration/apps.py
BenchmarksConfig  # benchmarks/apps.py

# Protocols: the call signature a conforming callable has
_.__call__  # graph_app/api/views.py

# REST framework and drf-spectacular hooks, django-filter methods and filter fields
_.filter_item  # audit_app/api/filters.py
_.filter_trace  # audit_app/api/filters.py
created_after  # audit_app/api/filters.py
created_before  # audit_app/api/filters.py
_.filter_active  # graph_app/api/filters.py
_.filter_after  # graph_app/api/filters.py
_.filter_before  # graph_app/api/filters.py
_.filter_file  # graph_app/api/filters.py
_.filter_q  # graph_app/api/filters.py
_.filter_valid_at  # graph_app/api/filters.py
occurred_after  # graph_app/api/filters.py
occurred_before  # graph_app/api/filters.py
ApiKeyAuthentication  # memoryproject/auth.py
ApiKeyAuthenticationScheme  # memoryproject/auth.py
HasProjectApiKey  # memoryproject/auth.py
_.authenticate  # memoryproject/auth.py
_.authenticate_header  # memoryproject/auth.py
_.get_security_definition  # memoryproject/auth.py
_.has_permission  # memoryproject/auth.py
auto_schema  # memoryproject/auth.py
is_anonymous  # memoryproject/auth.py
is_authenticated  # memoryproject/auth.py
target_class  # memoryproject/auth.py
_._get_pagination_parameters  # memoryproject/drf.py
_.get_filter_backends  # memoryproject/drf.py
_.get_request_serializer  # memoryproject/drf.py
_.get_response_serializers  # memoryproject/drf.py
JsonBodyParser  # memoryproject/drf_base.py
JsonNegotiation  # memoryproject/drf_base.py
Pagination  # memoryproject/drf_base.py
_.determine_actions  # memoryproject/drf_base.py
_.get_limit  # memoryproject/drf_base.py
_.get_offset  # memoryproject/drf_base.py
lockout_response  # memoryproject/login_lockout.py
original_response  # memoryproject/login_lockout.py
_.verify_token  # memoryproject/mcp_auth.py
JsonErrorsMiddleware  # memoryproject/middleware.py
_.process_exception  # memoryproject/middleware.py
TrustedProxyMiddleware  # memoryproject/proxies.py
field_class  # sessions_app/api/filters.py

# django-import-export resources
_.before_export  # audit_app/export.py
_.dehydrate_created_at  # audit_app/export.py
_.dehydrate_generated_at  # audit_app/export.py
_.dehydrate_items  # audit_app/export.py
_.dehydrate_project  # audit_app/export.py
_.dehydrate_request  # audit_app/export.py
_.dehydrate_trace_ids  # audit_app/export.py
export_order  # audit_app/export.py
record_format  # audit_app/export.py

# Pydantic contracts: response fields and validators (serialised by name)
changed_since  # audit_app/contracts.py
run_id  # audit_app/contracts.py
sha256_now  # audit_app/contracts.py
text_erased  # audit_app/contracts.py
version  # audit_app/contracts.py
algorithm  # graph_app/contracts/compile.py
open_finding  # graph_app/contracts/compile.py
next_offset  # graph_app/contracts/entities.py
scheduled  # graph_app/contracts/entities.py
content_truncated  # graph_app/contracts/episodes.py
_._has_object  # graph_app/contracts/facts.py
_._both_or_neither  # graph_app/contracts/integrity.py
checked_at  # graph_app/contracts/integrity.py
_._omit  # memoryproject/contracts.py
unwitnessed  # memoryproject/contracts.py
witnessed_at  # memoryproject/contracts.py
witnessed_seq  # memoryproject/contracts.py
exported_at  # memoryproject/export_file.py
graph_revision  # memoryproject/export_file.py
_._extra_keys_are_plain_json  # sessions_app/contracts.py
_._records_something  # sessions_app/contracts.py
_._scores_agree  # sessions_app/contracts.py
approved_by  # sessions_app/contracts.py
fields_present  # sessions_app/contracts.py
key_files  # sessions_app/contracts.py
saved_at  # sessions_app/contracts.py
traces_used  # sessions_app/contracts.py
would_inject  # sessions_app/contracts.py

# System checks and signal receivers (called by Django with these parameters)
app_configs  # audit_app/checks.py
retention_check  # audit_app/checks.py
sender  # audit_app/gate.py

# MCP tools and prompts, registered by decorator
architecture_briefing  # graph_app/mcp_tools/compile.py
bug_investigation_context  # graph_app/mcp_tools/compile.py
session_resume  # sessions_app/mcp_tools.py
sessions_latest  # sessions_app/mcp_tools.py

# Read by templates
_.advice  # audit_app/console_selectors.py
_.checked_range  # audit_app/console_selectors.py
_.full_verification  # audit_app/console_selectors.py
_.witness_summary  # audit_app/console_selectors.py
broken_reason  # audit_app/console_selectors.py
broken_seq  # audit_app/console_selectors.py
changed_since  # audit_app/console_selectors.py
sha256_now  # audit_app/console_selectors.py
text_erased  # audit_app/console_selectors.py
as_of_x  # graph_app/console/selectors.py
drawing  # graph_app/console/selectors.py
history_rows  # graph_app/console/selectors.py
in_view  # graph_app/console/selectors.py
known_at_x  # graph_app/console/selectors.py
neighbourhood  # graph_app/console/selectors.py
hidden_edges  # graph_app/domain/drawing.py
hidden_nodes  # graph_app/domain/drawing.py

# Reference implementations and test support: the oracles the property tests check the fast code against, and cache resets
merkle_root_reference  # memoryproject/domain/hashing.py
inclusion_proof  # graph_app/domain/proofs.py
inclusion_proof_reference  # graph_app/domain/proofs.py
timeline_forget  # graph_app/graph_caches.py
postgres_reachable  # memoryproject/loadtest/target.py
_.in_flight  # memoryproject/loadtest/workload.py
raw_confidence  # sessions_app/domain/trust.py

# Model fields set on an instance before it is saved
_.finished_at  # audit_app/findings.py
_.last_seen_run  # audit_app/findings.py
_.settled_at  # audit_app/findings.py
_.decided_at  # audit_app/reviews.py
_.decision_reason  # audit_app/reviews.py
_.decision_seq  # audit_app/reviews.py
_.delivered_at  # audit_app/reviews.py

# Attributes that libraries read: sqlite3 and psycopg connection settings, numpy's default factory of a dataclass field, the MCP SDK's tool signature
_.default_factory  # graph_app/domain/index_columns.py
_.isolation_level  # graph_app/integrity_worker.py
_.read_only  # graph_app/integrity_worker.py
_.__signature__  # memoryproject/mcp.py
_.row_factory  # sessions_app/cognos_import.py

# Documentation kept as code: the catalogue of problem kinds integrity reports, and a timeline line's field read by position
PROBLEM_KINDS  # graph_app/domain/sealing.py
open_leaf_hash  # graph_app/timeline_columns.py
