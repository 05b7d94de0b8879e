"""Concurrent clients over real HTTP: each thread keeps one connection to one server and sends
a weighted mix of plan, session save, trace, fact upsert, episode and compile requests with
plain engineering content. Every 2xx write is written down in the ledger as acknowledged;
latencies, statuses and connection errors are counted per endpoint."""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from benchmarks.loadtest.target import LoadTestError

Body = dict[str, Any]
Ack = tuple[str, Any]

PREDICATES = ("owner", "runtime", "deploy_target")
VALUES = {
    "owner": ("team_payments", "team_platform", "team_identity", "team_search"),
    "runtime": ("python_3_11", "python_3_12", "go_1_22", "java_21"),
    "deploy_target": ("eu_west_1", "us_east_1", "ap_south_1"),
}
CATEGORIES = ("adr", "bug_root_cause", "invariant", "session_note", "migration", "incident")
DEFAULT_MIX = {"trace": 3, "save": 1, "plan": 2, "upsert": 3, "episode": 1, "compile": 2}


@dataclass(frozen=True)
class Request:
    """One kind of call: where it goes, what it sends, and what a 2xx acknowledges."""

    name: str
    path: str
    build: Callable[[random.Random, str], Body]
    acks: Callable[[Body, Body], list[Ack]]


def _trace(rng: random.Random, subject: str) -> Body:
    step = rng.randrange(1000)
    return {
        "model": f"load-model-{rng.randrange(3)}",
        "policy": "agent",
        "active_project": subject,
        "last_decision": f"split {subject} handlers by tenant, step {step}",
        "current_output": f"src/{subject}/handlers.py refactored, {step % 40} tests passing",
        "open_questions": [f"should {subject} keep the old endpoint for one release?"],
    }


def _save(rng: random.Random, subject: str) -> Body:
    step = rng.randrange(1000)
    return {
        "summary": (
            f"Active project: {subject} (repo acme/{subject})\n"
            f"Last decision: move {subject} retries into a queue with backoff, step {step}\n"
            f"Current output: src/{subject}/retry.py with {step % 30} tests passing\n"
            f"Open questions: how many attempts before {subject} gives up?\n"
            f"Key files: src/{subject}/retry.py, src/{subject}/tests/test_retry.py"
        )
    }


def _plan(rng: random.Random, subject: str) -> Body:
    return {"n": rng.choice((3, 5, 10)), "mode": rng.choice(("auto", "auto", "force", "dry_run"))}


def _upsert(rng: random.Random, subject: str) -> Body:
    predicate = rng.choice(PREDICATES)
    return {
        "subject_id": subject,
        "predicate": predicate,
        "object_value": rng.choice(VALUES[predicate]),
    }


def _episode(rng: random.Random, subject: str) -> Body:
    step = rng.randrange(1000)
    return {
        "category": rng.choice(CATEGORIES),
        "title": f"{subject}: retry budget per tenant, note {step}",
        "content": (
            f"{subject} retried failed calls without a budget, so one tenant could exhaust the "
            f"pool. The handler now keeps a per-tenant budget of {step % 9 + 1} attempts and "
            f"records each refusal. Tests cover the budget and its reset."
        ),
        "files_touched": [f"src/{subject}/retry.py"],
        "entities_mentioned": [subject],
    }


def _compile(rng: random.Random, subject: str) -> Body:
    return {"query": f"{subject} owner runtime retry budget invariants", "max_tokens": 400}


REQUESTS: dict[str, Request] = {
    "trace": Request(
        "trace", "/v1/traces", _trace, lambda sent, got: [("traces", got["trace_id"])]
    ),
    "save": Request(
        "save", "/v1/sessions/save", _save, lambda sent, got: [("sessions", got["trace_id"])]
    ),
    "plan": Request(
        "plan", "/v1/plan", _plan, lambda sent, got: [("receipts", got["injection_id"])]
    ),
    "upsert": Request(
        "upsert",
        "/v1/graph/facts",
        _upsert,
        lambda sent, got: [
            ("facts", got["fact"]["id"]),
            ("singular", (sent["subject_id"], sent["predicate"])),
        ],
    ),
    "episode": Request(
        "episode", "/v1/graph/episodes", _episode, lambda sent, got: [("episodes", got["id"])]
    ),
    "compile": Request(
        "compile",
        "/v1/graph/compile",
        _compile,
        lambda sent, got: [("receipts", got["injection_id"])] if got.get("injection_id") else [],
    ),
}


def mix_parse(text: str) -> dict[str, int]:
    """``trace=3,plan=2`` → weights; unknown names or non-positive weights are refused."""
    mix: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, _, weight = item.partition("=")
        name = name.strip()
        if name not in REQUESTS:
            raise LoadTestError(f"mix: unknown request {name!r}; known: {', '.join(REQUESTS)}")
        try:
            mix[name] = int(weight) if weight.strip() else 1
        except ValueError:
            raise LoadTestError(f"mix: weight of {name} must be an integer") from None
        if mix[name] < 1:
            raise LoadTestError(f"mix: weight of {name} must be at least 1")
    if not mix:
        raise LoadTestError("mix: name at least one request")
    return mix


class Ledger:
    """What the service acknowledged (a 2xx), by kind; thread-safe."""

    KINDS = ("traces", "sessions", "facts", "episodes", "receipts", "singular")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, set[Any]] = {kind: set() for kind in self.KINDS}

    def add(self, acks: list[Ack]) -> None:
        with self._lock:
            for kind, value in acks:
                self._items[kind].add(value)

    def get(self, kind: str) -> set[Any]:
        with self._lock:
            return set(self._items[kind])

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {kind: len(items) for kind, items in self._items.items()}


@dataclass
class EndpointStats:
    latencies_ms: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)


class Stats:
    """Latency and outcome of every request, per endpoint and per server port; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.endpoints: dict[str, EndpointStats] = {}
        self.by_port: Counter[int] = Counter()

    def _endpoint(self, name: str) -> EndpointStats:
        return self.endpoints.setdefault(name, EndpointStats())

    def answered(self, name: str, port: int, status: int, ms: float, body: bytes) -> None:
        with self._lock:
            stats = self._endpoint(name)
            stats.latencies_ms.append(ms)
            stats.statuses[status] += 1
            self.by_port[port] += 1
            if status >= 500 and len(stats.samples) < 3:
                stats.samples.append(f"{status}: {body[:300].decode('utf-8', 'replace')}")

    def failed(self, name: str, error: str) -> None:
        with self._lock:
            self._endpoint(name).errors[error] += 1

    def total(self) -> int:
        with self._lock:
            return sum(
                len(s.latencies_ms) + sum(s.errors.values()) for s in self.endpoints.values()
            )


class Client:
    """One keep-alive connection to one server, reopened after a failure."""

    def __init__(self, port: int, key: str, timeout: float) -> None:
        self.port = port
        self.timeout = timeout
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self._connection: http.client.HTTPConnection | None = None

    def post(self, path: str, body: Body) -> tuple[int, bytes]:
        if self._connection is None:
            self._connection = http.client.HTTPConnection(
                "127.0.0.1", self.port, timeout=self.timeout
            )
        try:
            self._connection.request("POST", path, body=json.dumps(body), headers=self.headers)
            response = self._connection.getresponse()
            return response.status, response.read()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


class Workload:
    """``clients`` threads sending the ``mix`` to ``ports`` (client i to ports[i % n]) until
    stopped. ``subjects`` is how many entities the writes share: fewer means more contention
    on the same singular facts."""

    def __init__(
        self,
        *,
        ports: list[int],
        key: str,
        clients: int = 16,
        mix: dict[str, int] | None = None,
        subjects: int = 8,
        seed: int = 0,
        timeout: float = 60,
    ) -> None:
        if clients < 1 or subjects < 1 or not ports:
            raise LoadTestError("clients, subjects and ports: at least one each")
        self.ports = ports
        self.key = key
        self.clients = clients
        self.mix = dict(mix or DEFAULT_MIX)
        self.subjects = subjects
        self.seed = seed
        self.timeout = timeout
        self.ledger = Ledger()
        self.stats = Stats()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._in_flight = 0
        self.started_at = 0.0
        self.elapsed = 0.0

    def start(self) -> None:
        self.started_at = time.monotonic()
        self._threads = [
            threading.Thread(target=self._client, args=(index,), daemon=True, name=f"load-{index}")
            for index in range(self.clients)
        ]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stops sending; requests in flight finish (or time out) first. Idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        for thread in self._threads:
            thread.join(self.timeout + 5)
        self.elapsed = time.monotonic() - self.started_at

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered (or failed), now."""
        with self._lock:
            return self._in_flight

    def _flight(self, delta: int) -> None:
        with self._lock:
            self._in_flight += delta

    def _requests(self, rng: random.Random) -> Iterator[tuple[Request, Body]]:
        names = list(self.mix)
        weights = [self.mix[name] for name in names]
        while not self._stop.is_set():
            request = REQUESTS[rng.choices(names, weights)[0]]
            subject = f"svc_{rng.randrange(self.subjects)}"
            yield request, request.build(rng, subject)

    def _client(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + index)
        port = self.ports[index % len(self.ports)]
        client = Client(port, self.key, self.timeout)
        try:
            for request, body in self._requests(rng):
                self._send(client, request, body)
        finally:
            client.close()

    def _send(self, client: Client, request: Request, body: Body) -> None:
        began = time.perf_counter()
        self._flight(1)
        try:
            status, raw = client.post(request.path, body)
        except (OSError, http.client.HTTPException) as exc:
            self.stats.failed(request.name, type(exc).__name__)
            self._stop.wait(0.05)  # the server may be restarting: do not spin
            return
        finally:
            self._flight(-1)
        self.stats.answered(
            request.name, client.port, status, (time.perf_counter() - began) * 1000, raw
        )
        if 200 <= status < 300:
            try:
                self.ledger.add(request.acks(body, json.loads(raw)))
            except (ValueError, KeyError, TypeError):
                self.stats.failed(request.name, "unreadable 2xx body")
