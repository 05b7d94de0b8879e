"""The injection log in the console, as a compliance reader uses it: times to the second in
UTC, links to the traces, facts and episodes delivered, search by trace id, injection id,
item id and prompt hash, a from/to range, the chain banner, and "what did the agent get?"."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit_app.erasure import erase
from audit_app.injection_log import injection_log_append
from audit_app.models import InjectionLogHead, InjectionRecord, audit_maintenance
from graph_app.episode_writes import episode_record
from graph_app.fact_writes import fact_upsert
from graph_app.models import Episode, TemporalFact
from memoryproject.models import Project
from sessions_app.models import Trace
from sessions_app.selectors import trace_sha256
from sessions_app.trace_writes import trace_record

pytestmark = pytest.mark.django_db

LIST = "/admin/audit_app/injectionrecord/"
AT = datetime(2026, 11, 30, 16, 0, 12, 345000, tzinfo=UTC)


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_superuser("auditor", "", "pw-for-tests-only")
    client.force_login(user)
    return client


def deliver(project: Project, *, text: str = "SESSION_CONTEXT: use PASETO", **over) -> dict:
    """A trace, a fact and an episode, delivered by one receipt."""
    n = Trace.objects.count()
    trace_out = trace_record(
        project=project, model="claude-x", active_project=f"billing {n}", last_decision="retry"
    )
    trace = Trace.objects.get(trace_id=trace_out["trace_id"])
    fact_out = fact_upsert(
        project=project,
        subject_id="payments-service",
        predicate=f"uses_token_format_{n}",
        object_value="jwt",
    )
    fact = TemporalFact.objects.get(pk=fact_out["fact"]["id"])
    episode = Episode.objects.get(
        pk=episode_record(
            project=project, title=f"Move to PASETO {n}", category="adr", content="why"
        )["id"]
    )
    fields = {
        "project": project,
        "channel": "rest",
        "client": "api_key:abc (agent)",
        "status": "injected",
        "decision": "PASS",
        "trust_score": 0.91,
        "threshold": 0.75,
        "mode": "auto",
        "trace_ids": [str(trace.trace_id)],
        "system_prompt": text,
        "generated_at": AT,
        "source": "plan",
        "request": {"n": 5, "trust_threshold": 0.75, "mode": "auto"},
        "items": [
            {"kind": "trace", "id": str(trace.trace_id), "sha256": trace_sha256(trace)},
            {"kind": "fact", "id": fact.pk, "sha256": fact.sha256},
            {"kind": "episode", "id": episode.pk, "sha256": episode.sha256},
        ],
    }
    fields.update(over)
    record = injection_log_append(**fields)
    return {"record": record, "trace": trace, "fact": fact, "episode": episode}


@pytest.fixture
def demo():
    return Project.objects.get_or_create(slug="demo")[0]


def seqs(page: str) -> list[int]:
    """The seq column of a changelist page, top to bottom."""
    return [int(s) for s in re.findall(r'<th class="field-seq"><a href="[^"]+">(\d+)</a>', page)]


def test_list_shows_utc_seconds_readable_titles_and_links(staff, demo):
    with time_machine.travel(AT, tick=False):
        got = deliver(demo)
    page = staff.get(LIST).content.decode()
    assert '<time datetime="2026-11-30T16:00:12Z" class="utc-time">2026-11-30T16:00:12Z</time>' in (
        page
    )
    assert 'class="local-time" data-utc="2026-11-30T16:00:12Z"' in page
    assert f'href="/admin/sessions_app/trace/{got["trace"].pk}/change/"' in page
    assert f'href="/admin/graph_app/temporalfact/{quote(got["fact"].pk)}/change/"' in page
    assert f'href="/admin/graph_app/episode/{quote(got["episode"].pk)}/change/"' in page
    assert str(got["record"]) == "Plan for project demo — injected, 2026-11-30 16:00:12 UTC"
    assert str(got["fact"]).startswith("payments-service · uses_token_format_")
    assert str(got["fact"]).endswith(" = jwt")
    # The filters carry labels a screen reader announces.
    assert '<label for="created_from">From (UTC)</label>' in page
    assert '<label for="created_to">To (UTC, inclusive)</label>' in page


def test_banner_says_verified_with_the_head_and_the_last_checkpoint(staff, demo, settings):
    settings.AUDIT_CHECKPOINT_KEY = "k" * 40
    deliver(demo)
    page = staff.get(LIST).content.decode()
    head = InjectionLogHead.objects.get(pk=1)
    assert 'id="chain-status"' in page and 'data-verified="true"' in page
    assert "Chain status: verified" in page
    assert f'<code id="chain-head-hash">{head.last_hash}</code>' in page
    assert "none yet" in page
    from audit_app.checkpoints import audit_checkpoint_create

    audit_checkpoint_create()
    deliver(demo)
    page = staff.get(LIST).content.decode()
    assert f"at seq {head.seq}," in page and "signature good, consistent" in page
    assert re.search(r'id="chain-checkpoint-age">0\xa0minutes ago', page)


def test_banner_names_the_seq_where_the_chain_breaks(staff, demo):
    for _ in range(3):
        deliver(demo)
    second = InjectionRecord.objects.order_by("seq")[1]
    with audit_maintenance():
        InjectionRecord.objects.filter(pk=second.pk).update(client="someone else")
    page = staff.get(LIST).content.decode()
    assert 'data-verified="false"' in page
    assert f"Chain status: broken at seq {second.seq}" in page


def test_search_finds_by_trace_id_injection_id_item_id_and_prompt_hash(staff, demo):
    first, second = deliver(demo, text="first text"), deliver(demo, text="second text")
    wanted = first["record"]
    for term in [
        str(first["trace"].trace_id),
        str(wanted.pk),
        first["fact"].pk,
        first["episode"].pk,
        wanted.prompt_sha256,
        wanted.prompt_sha256[:12],
    ]:
        page = staff.get(LIST, {"q": term}).content.decode()
        assert seqs(page) == [wanted.seq], term
    assert seqs(staff.get(LIST, {"q": "no-such-item"}).content.decode()) == []
    assert seqs(staff.get(LIST).content.decode()) == [second["record"].seq, wanted.seq]


def test_created_range_is_inclusive_to_the_second_in_utc(staff, demo):
    made = {}
    for offset in (0, 1, 2):
        with time_machine.travel(AT + timedelta(seconds=offset), tick=False):
            made[offset] = deliver(demo)["record"].seq
    page = staff.get(
        LIST, {"created_from": "2026-11-30T16:00:13", "created_to": "2026-11-30T16:00:13"}
    ).content.decode()
    assert seqs(page) == [made[1]]
    page = staff.get(LIST, {"created_from": "2026-11-30T17:00:13+01:00"}).content.decode()
    assert seqs(page) == [made[2], made[1]]
    # A bad bound is named, never a server error, and the list stays whole.
    response = staff.get(LIST, {"created_from": "yesterday"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "from: &#x27;yesterday&#x27; is not an ISO-8601 timestamp" in page
    assert len(seqs(page)) == 3


def test_filters_by_decision_mode_source_and_client(staff, demo):
    deliver(demo, decision="ESCALATE", status="flagged", client="api_key:zzz (other)")
    kept = deliver(demo)["record"]
    page = staff.get(LIST, {"decision": "PASS"}).content.decode()
    assert seqs(page) == [kept.seq]
    page = staff.get(LIST, {"decision__exact": "PASS", "status__exact": "injected"})
    assert seqs(page.content.decode()) == [kept.seq]
    page = staff.get(LIST, {"client__exact": "api_key:zzz (other)"}).content.decode()
    assert seqs(page) == [kept.seq - 1]


def test_detail_shows_what_the_agent_got_and_what_changed_since(staff, demo):
    got = deliver(demo, text="SESSION_CONTEXT: payments use PASETO v4")
    record = got["record"]
    url = f"{LIST}{record.pk}/change/"
    page = staff.get(url).content.decode()
    assert "What did the agent get?" in page
    assert "SESSION_CONTEXT: payments use PASETO v4" in page
    assert '<dd id="delivery-score">0.91</dd>' in page
    assert '<dd id="delivery-threshold">0.75</dd>' in page
    assert page.count("unchanged") == 3
    assert f'href="/admin/sessions_app/trace/{got["trace"].pk}/change/"' in page
    assert f'href="/admin/graph_app/temporalfact/{quote(got["fact"].pk)}/change/"' in page
    assert 'name="_save"' not in page  # read-only
    erase(target="trace", ref=str(got["trace"].trace_id), reason="subject request", by="dpo")
    erase(target="fact", ref=got["fact"].pk, project=demo, reason="subject request", by="dpo")
    page = staff.get(url).content.decode()
    rows = dict(re.findall(r'data-kind="(\w+)" data-item-id="[^"]+">(.*?)</tr>', page, re.S))
    assert "changed" in rows["trace"] and "erased" in rows["trace"]
    assert ">changed<" in rows["fact"] and ">erased<" in rows["fact"]
    assert ">unchanged<" in rows["episode"] and ">no<" in rows["episode"]


def test_the_log_is_read_only_for_everyone(staff, demo):
    record = deliver(demo)["record"]
    assert staff.get(f"{LIST}add/").status_code == 403
    assert staff.post(f"{LIST}{record.pk}/change/", {"client": "x"}).status_code == 403
    assert staff.post(f"{LIST}{record.pk}/delete/", {"post": "yes"}).status_code == 403
    assert InjectionRecord.objects.get(pk=record.pk).client == "api_key:abc (agent)"


def _count(client, url: str, params: dict | None = None) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url, params or {}).status_code == 200
    return len(queries)


def test_pages_read_the_same_number_of_queries_for_10_or_200_records(
    staff, demo, django_assert_max_num_queries
):
    got = deliver(demo)
    items = got["record"].items
    for n in range(9):
        injection_log_append(**_plain(demo, n, items))
    _count(staff, LIST), _count(staff, f"{LIST}{got['record'].pk}/change/")  # warm caches
    small_list = _count(staff, LIST)
    small_detail = _count(staff, f"{LIST}{got['record'].pk}/change/")
    for n in range(9, 199):
        injection_log_append(**_plain(demo, n, items))
    assert InjectionRecord.objects.count() == 200
    assert _count(staff, LIST) == small_list
    assert _count(staff, LIST, {"p": "3"}) == small_list
    assert _count(staff, f"{LIST}{got['record'].pk}/change/") == small_detail
    with django_assert_max_num_queries(25):
        staff.get(LIST, {"q": str(got["trace"].trace_id), "decision__exact": "PASS"})
    with django_assert_max_num_queries(20):
        staff.get(f"{LIST}{got['record'].pk}/change/")


def _plain(project: Project, n: int, items: list) -> dict:
    return {
        "project": project,
        "channel": "mcp",
        "client": f"agent {n}",
        "status": "injected",
        "decision": "PASS",
        "trust_score": 0.8,
        "threshold": 0.5,
        "mode": "auto",
        "trace_ids": [items[0]["id"]],
        "system_prompt": f"text {n}",
        "generated_at": AT,
        "source": "plan",
        "items": items,
    }


def test_counts_and_export_work_with_the_range_filter(staff, demo):
    with time_machine.travel(AT, tick=False):
        deliver(demo)
    query = {"created_from": "2026-11-30T16:00:00", "_facets": "True"}
    assert staff.get(LIST, query).status_code == 200
    page = staff.get(f"{LIST}export/", {"created_from": "2026-11-30T16:00:00"})
    assert page.status_code == 200
