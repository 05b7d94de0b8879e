"""After the load: is every acknowledged write still there, is exactly one fact active per
singular (subject, predicate), does the injection log verify with contiguous seqs, and does
the graph verify? Reads go through the REST API with the auditor's (admin) key; the log is
verified by ``manage.py injection_log_verify``, as an operator would."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from benchmarks.loadtest.target import LoadTestError, Target, manage
from benchmarks.loadtest.workload import Ledger

PAGE = 200
# Where each kind of acknowledged write is listed, the id field of a listed item, and where
# one item is read by id (for anything a list did not show).
LISTINGS = {
    "traces": ("/v1/traces", "trace_id", "/v1/traces/{}"),
    "sessions": ("/v1/traces", "trace_id", "/v1/traces/{}"),
    "facts": ("/v1/graph/facts", "id", "/v1/graph/facts/{}"),
    "episodes": ("/v1/graph/episodes", "id", "/v1/graph/episodes/{}"),
    "receipts": ("/v1/audit/injections", "id", "/v1/audit/injections/{}"),
}


class Reader:
    """GETs with the auditor's key on one server."""

    def __init__(self, port: int, key: str, project: str, timeout: float = 120) -> None:
        self.port = port
        self.project = project
        self.timeout = timeout
        self.headers = {"Authorization": f"Bearer {key}"}

    def get(self, path: str, **params: Any) -> tuple[int, Any]:
        query = urlencode({"project": self.project, **params})
        sep = "&" if "?" in path else "?"
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            connection.request("GET", f"{path}{sep}{query}", headers=self.headers)
            response = connection.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise LoadTestError(f"GET {path}: {type(exc).__name__}: {exc}") from exc
        finally:
            connection.close()
        try:
            return response.status, json.loads(raw)
        except ValueError:
            return response.status, raw[:300].decode("utf-8", "replace")

    def pages(self, path: str) -> Iterator[dict[str, Any]]:
        """Every item of a paginated list, following ``next``."""
        status, page = self.get(path, limit=PAGE, offset=0)
        while True:
            if status != 200:
                raise LoadTestError(f"GET {path}: {status} {page}")
            yield from page["results"]
            if not page.get("next"):
                return
            parts = urlsplit(page["next"])
            status, page = self.get(f"{parts.path}?{parts.query}")


@dataclass
class Verification:
    """What was checked and what failed; ``ok`` when nothing did."""

    acknowledged: dict[str, int] = field(default_factory=dict)
    lost: dict[str, list[str]] = field(default_factory=dict)
    singular_pairs: int = 0
    singular_violations: list[str] = field(default_factory=list)
    injection_log: dict[str, Any] = field(default_factory=dict)
    seqs_contiguous: bool = False
    graph: dict[str, Any] = field(default_factory=dict)

    @property
    def lost_count(self) -> int:
        return sum(len(ids) for ids in self.lost.values())

    @property
    def ok(self) -> bool:
        return (
            self.lost_count == 0
            and not self.singular_violations
            and bool(self.injection_log.get("ok"))
            and self.seqs_contiguous
            and bool(self.graph.get("verified"))
        )

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "lost_count": self.lost_count, "ok": self.ok}


def _listed(reader: Reader, kind: str) -> set[str]:
    path, id_field, _ = LISTINGS[kind]
    return {str(item[id_field]) for item in reader.pages(path)}


def writes_missing(reader: Reader, ledger: Ledger) -> dict[str, list[str]]:
    """Acknowledged ids that neither their list nor a read by id can find, by kind."""
    missing: dict[str, list[str]] = {}
    listed: dict[str, set[str]] = {}
    for kind in LISTINGS:
        path = LISTINGS[kind][0]
        if path not in listed:
            listed[path] = _listed(reader, kind)
        unseen = sorted(str(v) for v in ledger.get(kind) if str(v) not in listed[path])
        detail = LISTINGS[kind][2]
        lost = [i for i in unseen if reader.get(detail.format(quote(i, safe="")))[0] != 200]
        if lost:
            missing[kind] = lost
    return missing


def singular_violations(reader: Reader, pairs: set[tuple[str, str]]) -> list[str]:
    """(subject, predicate) pairs written as singular that do not have exactly one active fact."""
    wrong = []
    for subject, predicate in sorted(pairs):
        status, page = reader.get(
            "/v1/graph/facts", subject=subject, predicate=predicate, active="true", limit=PAGE
        )
        count = page.get("count") if status == 200 and isinstance(page, dict) else None
        if count != 1:
            wrong.append(f"{subject} {predicate}: {count if count is not None else status} active")
    return wrong


def injection_log_check(target: Target, reader: Reader) -> tuple[dict[str, Any], bool]:
    """``manage.py injection_log_verify --json`` and whether the listed receipts' seqs run
    without a gap from the chain's anchor to its head."""
    result = manage(target.env, "injection_log_verify", "--json", check=False)
    try:
        log = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        log = {"ok": False, "error": (result.stderr or result.stdout).strip()[-1000:]}
    log["exit_status"] = result.returncode
    log["ok"] = bool(log.get("ok")) and result.returncode == 0
    seqs = sorted(int(item["seq"]) for item in reader.pages("/v1/audit/injections"))
    anchor = int((log.get("anchor") or {}).get("seq") or 0)
    head = (log.get("head") or {}).get("seq")
    expected = list(range(anchor + 1, int(head) + 1)) if head is not None else []
    return log, seqs == expected


def graph_check(reader: Reader) -> dict[str, Any]:
    status, body = reader.get("/v1/graph/integrity")
    if status != 200 or not isinstance(body, dict):
        return {"verified": False, "error": f"{status} {body}"}
    return {
        key: body.get(key)
        for key in ("verified", "facts", "episodes", "entities", "merkle_root", "mismatched_ids")
    } | {"problems": len(body.get("problems") or [])}


def verify_all(target: Target, port: int, ledger: Ledger) -> Verification:
    """Every check, through the server on ``port`` (which must be up)."""
    reader = Reader(port, target.admin_key, target.project)
    counts = ledger.counts()
    singular = ledger.get("singular")
    log, contiguous = injection_log_check(target, reader)
    return Verification(
        acknowledged={kind: n for kind, n in counts.items() if kind != "singular"},
        lost=writes_missing(reader, ledger),
        singular_pairs=len(singular),
        singular_violations=singular_violations(reader, singular),
        injection_log=log,
        seqs_contiguous=contiguous,
        graph=graph_check(reader),
    )
