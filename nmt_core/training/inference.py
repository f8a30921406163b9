"""Raw source lines in, detokenised translations out: what `nmt translate`, `nmt evaluate` and the MLflow model
share."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from nmt_core.config import BOUNDS, ConfigError
from nmt_core.data.batches import Example, cut_long
from nmt_core.data.corpora import MAX_TEXT_BYTES
from nmt_core.gates.gate import shown
from nmt_core.training.checkpoint import LoadedModel
from nmt_core.training.decode import Translation, translate
from nmt_core.training.train import resolve_device


def check_beam_size(beam: Any, key: str, source: str) -> int:
    """A beam size from any door (--beam, the API, a pyfunc's `params`) within decode.beam_size's bound: what beam
    search allocates grows with it."""
    limit = int(BOUNDS["decode.beam_size"].high)
    if isinstance(beam, bool) or not isinstance(beam, int) or not 1 <= beam <= limit:
        raise ConfigError(key, f"must be an integer in [1, {limit}] (got {shown(beam)})", source)
    return beam


def check_sentences(sentences: Any, key: str, source: str) -> None:
    """Source sentences from Python: a list of strings, at most MAX_TEXT_BYTES of text in all (a file's bound)."""
    if not isinstance(sentences, (list, tuple)) or not all(isinstance(s, str) for s in sentences):
        raise ConfigError(key, f"must be a list of strings (got {shown(sentences)})", source)
    if sum(len(s) for s in sentences) > MAX_TEXT_BYTES:
        raise ConfigError(key, f"more than {MAX_TEXT_BYTES:,} characters; translate it in parts", source)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def translate_lines(
    lines: list[str], loaded: LoadedModel, beam: int, where: str = "input", log: Callable[[str], None] = _stderr
) -> tuple[list[str], list[int], list[Translation]]:
    """Translate non-empty lines; empty lines stay empty (and get no trace rows). A line longer than
    decode.max_src_len tokens is translated from its first max_src_len tokens, and `log` names it.

    Returns the hypotheses (one per line), the indices of the non-empty lines and their decoder outputs.
    """
    device = resolve_device(loaded.config.train.device)
    model = loaded.model.to(device)
    tokens = cut_long(
        [loaded.src_segmenter.tokenize(line) for line in lines], loaded.config.decode.max_src_len, where, log
    )
    examples = [Example(loaded.src_vocab.encode(sentence), []) for sentence in tokens]
    keep = [i for i, e in enumerate(examples) if e.src]
    decoded = translate(
        model, [examples[i] for i in keep], loaded.config.decode, beam, loaded.config.train.batch_size, device
    )
    hypotheses = [""] * len(lines)
    for i, translation in zip(keep, decoded):
        hypotheses[i] = loaded.tgt_segmenter.detokenize(loaded.tgt_vocab.decode(translation.tokens))
    return hypotheses, keep, decoded
