"""`manage.py export_sources`: a verifiable citation bundle of the memory compiled for a query.

    manage.py export_sources --project P --query Q [--max-tokens N] --out FILE [--json]

It compiles through the same service as ``POST /v1/graph/compile`` with ``"with_proofs":
true`` (receipted in the injection log the same way, channel "cli") and writes the answer's
``proofs`` to FILE: every compiled item's full record, SHA-256 and RFC 6962 inclusion proof
against the graph's Merkle root, signed with AUDIT_CHECKPOINT_KEY when one is set.
``manage.py verify_sources FILE`` checks it offline. Bad arguments, an unknown project or an
unwritable FILE exit 2, naming what is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandParser

from graph_app.contracts.compile import CompileInput, CompileResult, SourceBundle
from graph_app.delivery import context_deliver
from memoryproject.command_output import json_flag_add, table
from memoryproject.contracts import Caller
from memoryproject.errors import ApplicationError
from memoryproject.projects import project_resolve


class Command(BaseCommand):
    help = (
        "Write the memory compiled for a query as a citation bundle with RFC 6962 inclusion "
        "proofs against the graph's signed Merkle root (check it with verify_sources)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--query", required=True, help="the task or question")
        parser.add_argument(
            "--max-tokens", dest="max_tokens", type=int, default=None, help="budget (64..32000)"
        )
        parser.add_argument("--out", required=True, metavar="FILE", help="where to write it")
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        out = Path(options["out"])
        if out.is_dir() or not out.parent.is_dir():
            # Before compiling: a delivery is receipted, so refuse what cannot be written first.
            self._fail(f"--out: {out} is not a file in an existing directory")
        fields: dict[str, Any] = {"query": options["query"], "with_proofs": True}
        if options["max_tokens"] is not None:
            fields["max_tokens"] = options["max_tokens"]
        try:
            params = CompileInput.parse(fields)
            project = project_resolve(slug=options["project"], api_key=None, access="read")
            caller = Caller(channel="cli", client="export_sources")
            result: CompileResult = context_deliver(project=project, params=params, caller=caller)
        except ApplicationError as exc:
            self._fail(exc.message)
        bundle = result.proofs
        assert bundle is not None  # asked for with_proofs
        try:
            out.write_text(json.dumps(bundle.as_json(), indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            self._fail(f"--out: cannot write {out}: {exc.strerror or exc}")
        if options["json"]:
            summary = {
                "out": str(out),
                "items": len(bundle.items),
                "root": bundle.root.as_json(),
                "injection_id": result.injection_id,
            }
            self.stdout.write(json.dumps(summary))
        else:
            self.stdout.write(self._render(bundle, out, result.injection_id), ending="")

    def _render(self, bundle: SourceBundle, out: Path, receipt: int | None) -> str:
        root = bundle.root
        signed = "HMAC-SHA256 (AUDIT_CHECKPOINT_KEY)" if root.signed else "UNSIGNED (no key set)"
        rows = [
            ("project", bundle.project),
            ("root", f"{root.root} (tree size {root.tree_size}, revision {root.revision})"),
            ("time", root.time),
            ("signature", signed),
            ("receipt", f"#{receipt}"),
        ]
        rows += [(item.citation, f"leaf {item.proof.leaf_index}") for item in bundle.items]
        title = f"{len(bundle.items)} sources with inclusion proofs written to {out}\n"
        return title + table(rows)

    def _fail(self, message: str) -> NoReturn:
        self.stderr.write(f"export_sources: {message}")
        raise SystemExit(2)
