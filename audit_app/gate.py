"""The maintenance gate of the append-only tables: opened only with a grant the witness signed.

The injection log's tables and the graph change log refuse UPDATE, DELETE (and TRUNCATE on
PostgreSQL) in the database. The retention purge and erasure must still remove rows, so the
triggers let a change through in one case only, which a database writer cannot produce by
flipping a value:

- SQLite: the triggers call ``memoryproject_gate_open()``, a function this service registers on
  each of its own connections, answering whether this thread holds the gate. Any other
  connection (the sqlite3 shell, another program) has no such function, so its UPDATE or
  DELETE on these tables fails whatever the tables hold.
- PostgreSQL: the triggers let a change through only in the transaction that inserted an
  ``AuditMaintenanceGrant`` row (``txid_current()``), which the service removes again before
  the maintenance block ends. A database writer can insert one, but it cannot sign it: every
  verifier holds each grant row left in the table to the witness, which has only the grants
  this service signed, and names any other.

``audit_maintenance(purpose=...)`` appends the signed grant to the witness first (refusing when
this host has no signing key), then opens the gate inside the current transaction and closes it
when the block ends (the grant's row goes with it); after the commit a checkpoint of what the
maintenance left (log head, graph heads) is witnessed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from memoryproject.append_only import gate_held, maintenance_open
from memoryproject.errors import ApplicationError
from memoryproject.timeutil import utcnow
from memoryproject.witness import witness
from memoryproject.writes import write_transaction


def _txid(connection: BaseDatabaseWrapper) -> int | None:
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT txid_current()")
        return int(cursor.fetchone()[0])


def _grant(using: str, purpose: str, details: dict[str, Any]) -> int:
    """Signs the grant into the witness, then records it where the triggers look; answers the
    row's id (removed again when the maintenance ends)."""
    from audit_app.models import AuditMaintenanceGrant, InjectionLogHead

    found = witness()
    if found is None or found.signer is None:
        raise ApplicationError(
            "maintenance of the append-only tables needs the witness signing key "
            "(WITNESS_DIR and WITNESS_KEY_FILE): the grant that opens them is signed with it",
            field="witness",
        )
    connection = connections[using]
    head = InjectionLogHead.objects.using(using).filter(pk=1).first()
    entry = found.append(
        "maintenance",
        {
            "purpose": purpose,
            "log": {"seq": head.seq if head else 0, "head": head.last_hash if head else ""},
            **details,
        },
    )
    row = AuditMaintenanceGrant.objects.using(using).create(
        created_at=utcnow(),
        purpose=purpose[:64],
        txid=_txid(connection),
        witness_n=entry.n,
        body=entry.body,
    )
    return int(row.pk)


def _grant_close(using: str, pk: int) -> None:
    """The grant's row goes when its maintenance ends (the gate still held): PostgreSQL's
    triggers would otherwise stay open for the rest of the transaction. The witness keeps the
    grant; a grant row found later is one nobody removed, so not the service's."""
    from audit_app.models import AuditMaintenanceGrant

    AuditMaintenanceGrant.objects.using(using).filter(pk=pk).delete()


@contextmanager
def audit_maintenance(
    using: str = DEFAULT_DB_ALIAS,
    *,
    purpose: str = "maintenance",
    details: dict[str, Any] | None = None,
    after: Callable[[], None] | None = None,
) -> Iterator[None]:
    """Lets UPDATE and DELETE through the append-only triggers (and the ORM's refusals) inside
    one transaction, which this opens or joins, with a grant the witness signed first. After
    the commit ``after`` runs (the checkpoint of what the maintenance left); nested uses share
    the outermost grant."""
    with write_transaction(using):
        if maintenance_open(using):
            with gate_held(using):
                yield
            return
        grant = _grant(using, purpose, dict(details or {}))
        if after is not None:
            transaction.on_commit(after, using=using)
        with gate_held(using):
            yield
            _grant_close(using, grant)
