"""The witness kept outside the database: where it is, its key, what it holds.

``manage.py witness`` prints a table (``--json``: one object): the directory, the public key's
id, the entries (checkpoints, maintenance grants) and each chain's witnessed head.
``--public-key`` prints the public key (PEM) to keep elsewhere: a verifier on another host
needs only it (WITNESS_PUBLIC_KEY_FILE). Exit 1 when no witness is configured or it is damaged.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memoryproject.command_output import json_flag_add, refuse, table
from memoryproject.errors import ApplicationError
from memoryproject.witness import public_key_pem, witness


class Command(BaseCommand):
    help = "Show the witness (directory, key id, entries, heads) or print its public key."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--public-key", action="store_true", help="print the public key")
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        as_json = options["json"]
        try:
            found = witness()
        except ApplicationError as exc:
            refuse(self, exc.message, as_json=as_json)
        if found is None:
            refuse(self, "no witness is configured (WITNESS_DIR=off)", as_json=as_json)
        if options["public_key"]:
            self.stdout.write(public_key_pem(found.public).decode("ascii"), ending="")
            return
        read = found.read()
        kinds: dict[str, int] = {}
        for entry in read.entries:
            kinds[entry.kind] = kinds.get(entry.kind, 0) + 1
        heads = {
            name: {"seq": head.seq, "hash": head.hash, "at": head.at}
            for name, head in sorted(read.heads.items())
        }
        report: dict[str, Any] = {
            "ok": not read.problems,
            "directory": read.directory,
            "key_id": read.key_id,
            "can_sign": found.signer is not None,
            "entries": len(read.entries),
            "kinds": kinds,
            "last_entry_at": read.entries[-1].at if read.entries else None,
            "heads": heads,
            "problems": read.problems,
        }
        if as_json:
            self.stdout.write(json.dumps(report))
        else:
            rows = [
                ("directory", read.directory),
                ("key id", f"{read.key_id} ({'signs' if report['can_sign'] else 'verify-only'})"),
                ("entries", ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "none"),
            ]
            rows += [
                (f"head {name}", f"seq {head.seq} {head.hash[:16]} at {head.at}")
                for name, head in sorted(read.heads.items())
            ]
            rows += [("PROBLEM", problem) for problem in read.problems]
            title = "witness intact" if report["ok"] else "witness DAMAGED"
            self.stdout.write(f"{title}\n" + table(rows), ending="")
        if read.problems:
            raise SystemExit(1)
