"""The witness: what the database held, signed and kept where a database writer cannot reach.

Someone with write access to the database can rewrite every table and recompute every hash
in it, checkpoint rows included. The witness holds the answer to that outside the database:
an append-only store of statements signed with an Ed25519 key whose private half never enters
the database. Verifiers need only the public half.

The store (memoryproject.witness_stores) is a directory (``WITNESS_DIR``, mode 0700, files
0600) or a second database (``WITNESS_DATABASE_URL``), holding two parts:

- the entries: one signed statement per line, appended under a lock every writer takes:
  checkpoints (the injection log's head and size, every project's graph head, size and Merkle
  root), maintenance grants (the only way the append-only tables open) and what a maintenance
  action changed. Each entry names the one before it (``prev``, the SHA-256 of its line) and
  is numbered (``n``), so a line removed or reordered is seen.
- the heads: the latest head of each chain, signed and replaced after every
  commit that moves it (the injection log's every receipt, each project's every graph write),
  only ever forward. A log cut short after the last checkpoint is seen against it.

Signatures cover the RFC 8785 canonical JSON of each body. A verifier reads the store once
and then only what was appended since (each line's signature is checked once per process).

What it cannot stop: whoever holds the private key file and the directory can rewrite the
witness too; keep a copy of the public key elsewhere and the directory on other storage
(another host's mount, object storage with a retention lock) where that matters.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from memoryproject.domain.canonical import canonical_json
from memoryproject.errors import ApplicationError
from memoryproject.timeutil import iso, utcnow
from memoryproject.witness_stores import DatabaseStore, DirectoryStore, private_dir

Store = DirectoryStore | DatabaseStore

log = logging.getLogger(__name__)

GENESIS = "0" * 64
#: The stream the injection log's head is witnessed under; a project's graph is
#: ``graph_stream(pk)``.
LOG_STREAM = "log"


def graph_stream(project_pk: int) -> str:
    return f"graph-{int(project_pk)}"


def _canonical(body: Mapping[str, Any]) -> bytes:
    return canonical_json(dict(body))


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# --- keys -------------------------------------------------------------------------------------


def key_id(public: Ed25519PublicKey) -> str:
    """A short name of a public key: the first 16 hex digits of the SHA-256 of its raw bytes."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def public_key_pem(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _private_make(path: Path) -> None:
    """A new signing key at ``path`` (0600), unless one is there. Written whole under a
    temporary name and linked into place: another process making it this very moment either
    wins (its key stands, ours is dropped) or finds the whole key, never an empty file."""
    private_dir(path.parent)
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return
    finally:
        temporary.unlink(missing_ok=True)
    log.warning("witness: a new signing key was made at %s (keep its public half apart)", path)


def _load_private(path: Path) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise ApplicationError(f"WITNESS_KEY_FILE: cannot read {path}: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ApplicationError(f"WITNESS_KEY_FILE: {path} is not an Ed25519 private key")
    return key


def _load_public(path: Path) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        raise ApplicationError(f"WITNESS_PUBLIC_KEY_FILE: cannot read {path}: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise ApplicationError(f"WITNESS_PUBLIC_KEY_FILE: {path} is not an Ed25519 public key")
    return key


# --- reading ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One verified line of the store."""

    n: int
    kind: str
    at: str
    body: dict[str, Any]
    digest: str


@dataclass(frozen=True)
class Head:
    stream: str
    seq: int
    hash: str
    at: str
    body: dict[str, Any]


@dataclass
class WitnessRead:
    """What the store holds, signatures checked: the entries in order, the heads by stream,
    and every problem found (a line whose signature fails or that breaks the order, an
    unreadable head). Nothing after the first bad line is trusted."""

    directory: str
    key_id: str
    entries: list[Entry] = field(default_factory=list)
    heads: dict[str, Head] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[Entry]:
        return [entry for entry in self.entries if entry.kind == kind]


@dataclass
class _Parsed:
    """The entries already verified in this process (``cursor``: where the store left off)."""

    cursor: Any
    entries: list[Entry]
    prev: str
    problem: str


def _signed(line: Mapping[str, Any], public: Ed25519PublicKey) -> dict[str, Any] | None:
    body, signature = line.get("body"), line.get("sig")
    if not isinstance(body, dict) or not isinstance(signature, str):
        return None
    try:
        public.verify(_unb64(signature), _canonical(body))
    except (InvalidSignature, ValueError, TypeError):
        return None
    return body


#: Head lines a witness keeps, checked, by their bytes (about 1 KiB each): a head file holds two,
#: one per writer, and every commit writes a new one, so older ones are let go (a line read again
#: is checked again). 1,024 covers both slots of 512 streams (the log's and each project's graph).
VERIFIED_KEPT = 1024
_UNCHECKED: Any = object()


def _remember(
    verified: dict[bytes, dict[str, Any] | None], line: bytes, body: dict[str, Any] | None
) -> None:
    """Keeps ``body`` as what ``line`` states (None: not signed), forgetting every line kept so
    far once ``VERIFIED_KEPT`` are."""
    if len(verified) >= VERIFIED_KEPT:
        verified.clear()
    verified[line] = body


def _head_of(
    line: bytes, public: Ed25519PublicKey, stream: str, verified: dict[bytes, dict[str, Any] | None]
) -> Head | None:
    """The head a stored line states, or None when empty, torn or not signed. ``verified``:
    lines already checked under this key, by their bytes (heads are read on every commit)."""
    if not line:
        return None
    # Read once: another thread may let the kept lines go between a test and a read.
    body = verified.get(line, _UNCHECKED)
    if body is _UNCHECKED:
        try:
            body = _signed(json.loads(line), public)
        except ValueError:
            body = None
        _remember(verified, line, body)
    if body is None or body.get("stream") != stream:
        return None
    return Head(stream, int(body["seq"]), str(body["hash"]), str(body["at"]), body)


def _claimed_seq(line: bytes, stream: str, verified: dict[bytes, dict[str, Any] | None]) -> int:
    """The seq a stored head line claims for ``stream``, its signature not checked (-1: none,
    or a line already found unsigned)."""
    if not line:
        return -1
    body = verified.get(line, _UNCHECKED)
    if body is _UNCHECKED:
        try:
            body = json.loads(line).get("body")
        except (ValueError, AttributeError):
            return -1
    if not isinstance(body, dict) or body.get("stream") != stream:
        return -1
    try:
        return int(body["seq"])
    except (KeyError, TypeError, ValueError):
        return -1


class Witness:
    """One witness store and its keys (``signer`` None: verify-only)."""

    def __init__(
        self, store: Store, public: Ed25519PublicKey, signer: Ed25519PrivateKey | None
    ) -> None:
        self.store = store
        self.public = public
        self.signer = signer
        self.key_id = key_id(public)
        self._lock = threading.RLock()
        self._parsed: _Parsed | None = None
        self._verified: dict[bytes, dict[str, Any] | None] = {}

    # --- writing ------------------------------------------------------------------------------

    def _sign(self, body: Mapping[str, Any]) -> bytes:
        if self.signer is None:
            raise ApplicationError(
                "WITNESS_KEY_FILE: no signing key here (a verify-only witness): maintenance and "
                "checkpoints need the private key"
            )
        signature = self.signer.sign(_canonical(body))
        signed = {"body": dict(body), "sig": _b64(signature), "key": self.key_id}
        # An entry is named by the SHA-256 of its line as stored, so lines written before
        # entries were canonical JSON (ASCII-escaped by the json module) still verify.
        return canonical_json(signed)

    def append(self, kind: str, details: Mapping[str, Any]) -> Entry:
        """Appends one signed entry (durable before it answers)."""
        with self._lock, self.store.entries_locked():
            read = self.read(streams=())
            if read.problems:
                raise ApplicationError(
                    f"witness: {self.store.label} is damaged ({read.problems[0]}); nothing more "
                    "is appended to it"
                )
            last = read.entries[-1] if read.entries else None
            body = {
                **dict(details),
                "kind": kind,
                "n": (last.n + 1) if last else 1,
                "prev": last.digest if last else GENESIS,
                "at": iso(utcnow()),
            }
            line = self._sign(body)
            self.store.entry_write(body["n"], line)
            return Entry(body["n"], kind, body["at"], body, hashlib.sha256(line).hexdigest())

    def head_advance(self, stream: str, seq: int, digest: str, **details: Any) -> bool:
        """Witnesses that ``stream`` reached ``seq`` with hash ``digest``; only ever forward (a
        later writer's head already witnessed stays). Answers whether it moved."""
        with self._lock, self.store.head_locked(stream):
            lines = self.store.head_lines(stream)
            # Slots by the seq they claim, newest first. A signature is checked only where the
            # answer depends on it: a claim at or past ``seq`` stops this head if it is signed.
            # Below ``seq`` the newest claim's slot is kept, its signature unchecked, and the other
            # slot overwritten: with two writers that claim is the other writer's last head, new
            # every time, and checking it cost 75 µs a commit. Were it forged, the head written
            # here is still the newest signed one, and readers check every signature.
            claims = sorted(
                (
                    (_claimed_seq(line, stream, self._verified), index)
                    for index, line in enumerate(lines)
                ),
                reverse=True,
            )
            kept = None
            for claimed, index in claims:
                if claimed < 0:
                    continue
                if claimed >= seq:
                    if _head_of(lines[index], self.public, stream, self._verified) is not None:
                        return False
                    continue
                kept = index
                break
            body = {**details, "stream": stream, "seq": int(seq), "hash": digest}
            body["at"] = iso(utcnow())
            line = self._sign(body)
            self.store.head_write(stream, line, kept)
            _remember(self._verified, line, body)  # signed here: not checked when read back
            return True

    # --- reading ------------------------------------------------------------------------------

    def _head_read(self, stream: str) -> tuple[Head | None, str]:
        lines = self.store.head_lines(stream)
        if not lines:
            return None, ""
        heads = [_head_of(line, self.public, stream, self._verified) for line in lines]
        found = [head for head in heads if head is not None]
        if not found:
            return None, f"the witnessed head of {stream} is unreadable or its signature fails"
        return max(found, key=lambda h: h.seq), ""

    def _entries(self) -> _Parsed:
        parsed = self._parsed
        cursor, lines, reset = self.store.entries_read(parsed.cursor if parsed else None)
        if parsed is None or reset:
            parsed = _Parsed(None, [], GENESIS, "")
        if parsed.problem or not lines:
            self._parsed = _Parsed(cursor, parsed.entries, parsed.prev, parsed.problem)
            return self._parsed
        entries, prev, problem = list(parsed.entries), parsed.prev, ""
        for raw in lines:
            number = len(entries) + 1
            try:
                body = _signed(json.loads(raw), self.public)
            except ValueError:
                body = None
            if body is None:
                problem = f"entries: line {number} is not a statement signed by key {self.key_id}"
                break
            if body.get("n") != number or body.get("prev") != prev:
                problem = (
                    f"entries: line {number} is out of order (an entry before it was removed, "
                    "inserted or moved)"
                )
                break
            digest = hashlib.sha256(raw).hexdigest()
            entries.append(Entry(number, str(body.get("kind")), str(body.get("at")), body, digest))
            prev = digest
        self._parsed = _Parsed(cursor, entries, prev, problem)
        return self._parsed

    def read(self, streams: tuple[str, ...] | None = None) -> WitnessRead:
        """The verified entries, and the heads of ``streams`` (every stream when None)."""
        with self._lock:
            parsed = self._entries()
            result = WitnessRead(self.store.label, self.key_id, list(parsed.entries))
            if parsed.problem:
                result.problems.append(parsed.problem)
            names = tuple(sorted(self.store.streams())) if streams is None else streams
            for stream in names:
                head, problem = self._head_read(stream)
                if head is not None:
                    result.heads[stream] = head
                if problem:
                    result.problems.append(problem)
        return result


# --- the configured witness -------------------------------------------------------------------

_cache: dict[tuple[str, str, str, str], Witness] = {}
_cache_lock = threading.Lock()


_WITNESS_SETTINGS = (
    "WITNESS_DIR",
    "WITNESS_KEY_FILE",
    "WITNESS_PUBLIC_KEY_FILE",
    "WITNESS_DATABASE_URL",
)


@cache  # read once (every write asks for the witness); again when a setting changes (tests)
def witness_settings() -> tuple[str, str, str, str]:
    return (
        str(getattr(settings, "WITNESS_DIR", "") or ""),
        str(getattr(settings, "WITNESS_KEY_FILE", "") or ""),
        str(getattr(settings, "WITNESS_PUBLIC_KEY_FILE", "") or ""),
        str(getattr(settings, "WITNESS_DATABASE_URL", "") or ""),
    )


@receiver(setting_changed)
def _witness_settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in _WITNESS_SETTINGS:
        witness_settings.cache_clear()


def _store(directory: str, database_url: str) -> Store:
    if not database_url:
        return DirectoryStore(Path(directory))
    own = settings.DATABASES["default"]
    try:
        store = DatabaseStore(database_url)
    except ValueError as exc:
        raise ApplicationError(f"WITNESS_DATABASE_URL: {exc}") from None
    theirs = store.config
    if (theirs.get("NAME"), theirs.get("HOST") or "") == (own.get("NAME"), own.get("HOST") or ""):
        raise ApplicationError(
            "WITNESS_DATABASE_URL names the service's own database: a witness there is no "
            "witness (use another database, with credentials the service's does not hold)"
        )
    return store


def witness() -> Witness | None:
    """The configured witness, or None when none is (``WITNESS_DIR`` and
    ``WITNESS_DATABASE_URL`` empty): verifiers then say "unanchored". The store is the second
    database when ``WITNESS_DATABASE_URL`` is set, else the directory. The signing key is made
    on first use when ``WITNESS_KEY_FILE`` names a file that does not exist yet and no public
    key file is configured."""
    configured = witness_settings()
    directory, private_file, public_file, database_url = configured
    if not directory and not database_url:
        return None
    with _cache_lock:
        found = _cache.get(configured)
        if found is not None:
            return found
        signer = None
        if private_file:
            private_path = Path(private_file)
            if not private_path.exists() and not public_file:
                _private_make(private_path)
            if private_path.exists():
                signer = _load_private(private_path)
        if public_file:
            public = _load_public(Path(public_file))
            if signer is not None and key_id(signer.public_key()) != key_id(public):
                raise ApplicationError(
                    "WITNESS_PUBLIC_KEY_FILE: it is not the public half of WITNESS_KEY_FILE"
                )
        elif signer is not None:
            public = signer.public_key()
        else:
            raise ApplicationError(
                "WITNESS_DIR is set but neither WITNESS_KEY_FILE nor WITNESS_PUBLIC_KEY_FILE "
                "names a key"
            )
        found = Witness(_store(directory, database_url), public, signer)
        _cache[configured] = found
        return found


def witness_head_advance(stream: str, seq: int, digest: str, **details: Any) -> None:
    """After a commit that moved a chain: witnesses its new head. Never raises: the write it
    follows is committed and acknowledged; a witness that cannot be written is logged (the
    verifiers then see the records after the last witnessed head as not yet witnessed)."""
    try:
        found = witness()
        if found is not None and found.signer is not None:
            found.head_advance(stream, seq, digest, **details)
    except Exception:
        log.exception("witness: could not witness the head of %s at %s", stream, seq)
