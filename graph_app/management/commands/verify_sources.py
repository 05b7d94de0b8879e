"""`manage.py verify_sources`: checks a citation bundle offline, without the database.

    manage.py verify_sources FILE [--json]

FILE is a bundle written by ``export_sources`` (or a ``POST /v1/graph/compile`` answer made
``with_proofs``, whose ``proofs`` is one). Every item must be a record's canonical JSON whose
SHA-256, id, kind and times are the ones the item states, and its RFC 6962 inclusion proof
must lead to the bundle's Merkle root; the root's HMAC is checked too when
AUDIT_CHECKPOINT_KEY is set (a signed root cannot be checked without it, and says so). Names
every item that fails. Exit 0 when everything verifies, 1 when something fails, 2 when FILE is
no bundle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from graph_app.domain.proofs import bundle_check, bundle_shape_problem
from memoryproject.checkpoint_key import checkpoint_key
from memoryproject.command_output import json_flag_add, table
from memoryproject.errors import ApplicationError

SIGNATURE_SAYS = {
    "valid": "valid (HMAC-SHA256, AUDIT_CHECKPOINT_KEY)",
    "invalid": "INVALID: the root was altered or signed with another key",
    "unchecked": "not checked: AUDIT_CHECKPOINT_KEY is not set here",
    "unsigned": "none: the root is unsigned (no key was set when it was made)",
}


class Command(BaseCommand):
    help = (
        "Check a citation bundle's inclusion proofs offline and name every item that fails "
        "(exit 0 verified, 1 failed, 2 not a bundle)."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", metavar="FILE", help="a bundle written by export_sources")
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        bundle = self._read(Path(options["file"]))
        try:
            key = checkpoint_key() if getattr(settings, "AUDIT_CHECKPOINT_KEY", "") else None
        except ApplicationError as exc:
            self._fail(exc.message)
        results, signature = bundle_check(bundle, key)
        failed = [(name, problem) for name, problem in results if problem is not None]
        ok = not failed and signature != "invalid"
        if options["json"]:
            report = {
                "ok": ok,
                "items": len(results),
                "verified": len(results) - len(failed),
                "failed": [{"id": name, "reason": problem} for name, problem in failed],
                "signature": signature,
                "root": bundle["root"],
            }
            self.stdout.write(json.dumps(report))
        else:
            self.stdout.write(self._render(bundle, results, signature, ok), ending="")
        if not ok:
            raise SystemExit(1)

    def _read(self, path: Path) -> dict[str, Any]:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            self._fail(f"FILE: cannot read {path}: {exc.strerror or exc}")
        except (UnicodeDecodeError, ValueError):
            self._fail(f"FILE: {path} is not JSON")
        if isinstance(document, dict) and isinstance(document.get("proofs"), dict):
            document = document["proofs"]  # a compile answer made with_proofs
        problem = bundle_shape_problem(document)
        if problem is not None:
            self._fail(f"FILE: {path} is not a citation bundle: {problem}")
        return dict(document)

    def _render(
        self,
        bundle: dict[str, Any],
        results: list[tuple[str, str | None]],
        signature: str,
        ok: bool,
    ) -> str:
        root = bundle["root"]
        failed = sum(problem is not None for _, problem in results)
        state = "VERIFIED" if ok else "NOT VERIFIED"
        title = (
            f"citation bundle {state}: {len(results) - failed} of {len(results)} items "
            f"proven against the root\n"
        )
        rows = [
            ("project", str(root.get("project"))),
            ("root", f"{root.get('root')} (tree size {root.get('tree_size')})"),
            ("time", str(root.get("time"))),
            ("signature", SIGNATURE_SAYS[signature]),
        ]
        rows += [
            (name, "ok" if problem is None else f"FAILED: {problem}") for name, problem in results
        ]
        return title + table(rows)

    def _fail(self, message: str) -> NoReturn:
        self.stderr.write(f"verify_sources: {message}")
        raise SystemExit(2)
