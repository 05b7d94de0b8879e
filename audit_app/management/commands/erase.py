"""Erases content everywhere it lives and prints a certificate (see audit_app.erasure).

    manage.py erase (--trace ID | --summary ID | --episode ID | --fact ID | --entity E |
                     --text-sha H) --reason TEXT [--project P] [--by NAME] [--json]

Exit 0 with the certificate; 2 when nothing matched or an argument is wrong.
"""

from __future__ import annotations

import getpass
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from audit_app.erasure import erase
from memoryproject.command_output import json_flag_add
from memoryproject.errors import ApplicationError
from memoryproject.projects import project_resolve

TARGETS = {
    "trace": "a trace id",
    "summary": "the trace id of a saved session summary",
    "episode": "an episode id (with --project)",
    "fact": "a fact id (with --project)",
    "entity": "an entity id and its facts (with --project)",
    "text_sha": "the SHA-256 of a delivered text",
}


class Command(BaseCommand):
    help = "Erase content everywhere it lives; keep its hashes; print a certificate."

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        for name, meaning in TARGETS.items():
            which.add_argument(f"--{name.replace('_', '-')}", dest=name, help=meaning)
        parser.add_argument("--reason", required=True, help="why (recorded in the log)")
        parser.add_argument("--project", help="project slug of a graph record")
        parser.add_argument("--by", default=None, help="who asks (default: the OS user)")
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        name = next(n for n in TARGETS if options.get(n))
        target = "text" if name == "text_sha" else name
        try:
            project = (
                project_resolve(slug=options["project"], api_key=None, access="read")
                if options["project"]
                else None
            )
            certificate = erase(
                target=target,  # type: ignore[arg-type]
                ref=options[name],
                reason=options["reason"],
                by=options["by"] or getpass.getuser(),
                project=project,
            )
        except ApplicationError as exc:
            self.stderr.write(f"erase: {exc.message}")
            raise SystemExit(2) from exc
        if options["json"]:
            self.stdout.write(json.dumps(certificate.as_json()))
            return
        c = certificate
        self.stdout.write(f"ERASURE CERTIFICATE (injection log event #{c.event_seq})")
        self.stdout.write(f"erased      {c.target} {c.ref} (project {c.project or '-'})")
        self.stdout.write(f"when        {c['erased_at']}")
        self.stdout.write(f"why         {c.reason}")
        self.stdout.write(f"by          {c.by}")
        for item in c.erased:
            self.stdout.write(f"hash        {item.kind} {item.id} sha256:{item.sha256}")
        for sha in c.texts_erased:
            self.stdout.write(f"text        sha256:{sha} (delivered text removed)")
        receipts = ", ".join(f"#{seq}" for seq in c.receipts) or "none"
        self.stdout.write(f"receipts    {receipts} (kept: they hold hashes, not content)")
