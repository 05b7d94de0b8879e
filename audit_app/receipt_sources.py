"""What each receipt delivered, one row per source: the index auditors search receipts by
(trace id, item id), and the reason receipted evidence cannot be deleted.

A source is looked up by its link's index (``receipts_delivering``): the row's id resolves to
the link, so the item ids themselves are indexed only on the rows without one (a source whose
row was gone when it was delivered), and a receipt's commit does not write an index page per
delivered item for them.

A receipt's chained record already holds its items (kind, id, content hash). These rows repeat
them with a foreign key to the source row, ``on_delete=PROTECT``: a trace, saved summary, fact
or episode that any receipt delivered cannot be deleted through the ORM or the admin. Erasure
(``audit_app.erasure``) removes such a source's content but keeps its row, so the receipt, its
hashes and this index stay whole.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import models
from django.db.models import Q

from memoryproject import sql


def _source_link(to: str) -> models.ForeignKey[Any, Any]:
    """A link to the source row an item was delivered from: none when it was gone, and the
    row cannot be deleted while linked. Indexed by the model's partial indexes, not here."""
    return models.ForeignKey(
        to, null=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )


class ReceiptSource(models.Model):
    # An index, not evidence: no database constraint to the record, so tampering with the
    # log is left for verification to find (and name) rather than failing somewhere else.
    record = models.ForeignKey(
        "audit_app.InjectionRecord",
        on_delete=models.PROTECT,
        related_name="sources",
        db_constraint=False,
    )
    kind = models.CharField(max_length=16)  # trace | summary | fact | episode
    item_id = models.CharField(max_length=64)
    sha256 = models.CharField(max_length=64)
    # By name: this module is imported by audit_app.models, which the graph's models import.
    # Each row links one of the four (its kind's), so each link is indexed only where set
    # (the partial indexes below): a receipt's commit then writes the pages of one link index,
    # not four (the deletion checks of PROTECT look a row up by a set value, which they use).
    trace = _source_link("sessions_app.Trace")
    summary = _source_link("sessions_app.SessionSummary")
    fact = _source_link("graph_app.TemporalFact")
    episode = _source_link("graph_app.Episode")

    class Meta:
        app_label = "audit_app"
        indexes = [
            # By id, only the rows that link no source row: the others are found by their link.
            models.Index(
                fields=["item_id"],
                condition=Q(trace__isnull=True, summary__isnull=True)
                & Q(fact__isnull=True, episode__isnull=True),
                name="receipt_source_unlinked",
            ),
            *(
                models.Index(
                    fields=[link],
                    condition=models.Q(**{f"{link}__isnull": False}),
                    name=f"receipt_source_{link}",
                )
                for link in ("trace", "summary", "fact", "episode")
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.item_id} delivered by receipt seq {self.record.seq}"


def receipt_sources_add(
    record: Any,
    items: Sequence[Mapping[str, str]],
    rows: Mapping[tuple[str, str], int] | None = None,
) -> None:
    """Indexes a receipt's delivered items, each linked to its source row when it still
    exists (call in the receipt's transaction). ``rows`` maps (kind, id) to the source row's
    key for the items whose rows the caller has just read (the plan's traces); the others are
    looked up."""
    from graph_app.models import Episode, TemporalFact
    from sessions_app.models import SessionSummary, Trace

    rows = rows or {}
    wanted_by_kind: dict[str, list[str]] = {}
    for i in items:
        if (i["kind"], i["id"]) not in rows:
            wanted_by_kind.setdefault(i["kind"], []).append(i["id"])

    # One query per kind delivered: the source rows that exist (a receipt may name what is gone).
    # Unordered, so that the lookup uses the (project, trace_id) unique index rather than the
    # models' default ordering's index, which reads every trace of the project.
    def by_trace_id(model: type[models.Model], trace_id: str, wanted: list[str]) -> dict[str, Any]:
        in_project = model._default_manager.filter(
            project_id=record.project_id, **{f"{trace_id}__in": uuids_parsed(wanted)}
        )
        return {str(t): pk for t, pk in in_project.order_by().values_list(trace_id, "pk")}

    def by_pk(model: type[models.Model], wanted: list[str]) -> dict[str, Any]:
        # One plain statement: a queryset would cost more to build than the lookup itself.
        key = sql.column(model, "pk")
        marks = ", ".join(["%s"] * len(wanted))
        found = sql.fetch(f"SELECT {key} FROM {sql.table(model)} WHERE {key} IN ({marks})", wanted)
        return {pk: pk for (pk,) in found}

    lookups: dict[str, Any] = {
        "trace": lambda wanted: by_trace_id(Trace, "trace_id", wanted),
        "summary": lambda wanted: by_trace_id(SessionSummary, "trace__trace_id", wanted),
        "fact": lambda wanted: by_pk(TemporalFact, wanted),
        "episode": lambda wanted: by_pk(Episode, wanted),
    }
    found: dict[str, dict[str, int | str]] = {
        kind: lookup(wanted_by_kind[kind]) if kind in wanted_by_kind else {}
        for kind, lookup in lookups.items()
    }
    index = []
    for item in items:
        kind, item_id = item["kind"], item["id"]
        links = dict.fromkeys(_LINKS)
        if kind in found:
            links[kind] = rows.get((kind, item_id), found[kind].get(item_id))
        index.append((record.pk, kind, item_id, item["sha256"], *links.values()))
    sql.insert_rows(ReceiptSource, _COLUMNS, index)


#: The source a receipt's item links to, one column per kind, and the columns of an index row.
_LINKS = ("trace", "summary", "fact", "episode")
_COLUMNS = ("record", "kind", "item_id", "sha256", *_LINKS)
#: A row that links no source row (its source was gone when it was delivered).
_UNLINKED = tuple(f"{link}__isnull" for link in _LINKS)


def receipts_delivering(item_id: str, kinds: Sequence[str] = _LINKS) -> Q:
    """The receipts (an ``InjectionRecord`` filter) that delivered the source ``item_id`` of one
    of ``kinds``: a trace or summary by its trace id (a UUID), a fact or episode by its id. Each
    branch is one lookup through one index: the link to the source's row, or for a source
    whose row was gone when it was delivered, its id among the rows that link none."""
    from sessions_app.models import SessionSummary, Trace

    value = item_id.strip()
    as_uuid = uuids_parsed([value])
    # Each kind's link, as a filter of the source rows.
    by_link: dict[str, dict[str, Any]] = {"fact": {"fact": value}, "episode": {"episode": value}}
    if as_uuid:
        value = str(as_uuid[0])  # as stored: the canonical form
        traces = Trace.objects.filter(trace_id=as_uuid[0]).values("pk")
        summaries = SessionSummary.objects.filter(trace__trace_id=as_uuid[0]).values("pk")
        by_link.update(trace={"trace__in": traces}, summary={"summary__in": summaries})
    sources = ReceiptSource.objects.order_by()
    unlinked = sources.filter(**dict.fromkeys(_UNLINKED, True), item_id=value, kind__in=kinds)
    found = Q(pk__in=unlinked.values("record_id"))
    for kind in kinds:
        if kind in by_link:
            found |= Q(pk__in=sources.filter(**by_link[kind]).values("record_id"))
    return found


def uuids_parsed(values: Sequence[str]) -> list[uuid.UUID]:
    """The UUIDs among ``values``, parsed (the others left out)."""
    out = []
    for value in values:
        try:
            out.append(uuid.UUID(value))
        except ValueError:
            continue
    return out
