"""Word alignments for guided alignment training: the corpus's gold links, or eflomal's, computed once and cached.

Gold links index the corpus's own tokens, so they serve only a trial that splits text as the corpus does
(`data.tokenizer: space`). Any other corpus or tokenizer is aligned by eflomal (an optional extra: Bayesian
IBM models, Ostling & Tiedemann 2016) over the trial's own training tokens; the links are cached next to the
corpus under the hash of those tokens, so every trial with the same data reuses them.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import tempfile
from pathlib import Path

import torch
from torch import Tensor

from nmt_core.data.corpora import CorpusError, cache_root, write_atomically
from nmt_core.gates.decoders import gunzip, json_value
from nmt_core.gates.gate import clip_path, exclusive, read_regular

Links = list[tuple[int, int]]  # (source index, target index) pairs of one sentence
LINKS_BYTES = 512 * 2**20  # a corpus's links as JSON: a million pairs of 30 links take about 250 MB
LINK_JSON_BYTES = 28  # one link as json.dumps writes it, `[i, j], `, with two 10-digit indices


def eflomal_links(pairs: list[tuple[list[str], list[str]]], cache_dir: str) -> list[Links]:
    """eflomal's forward links for tokenised pairs, computed once per distinct set of pairs and cached."""
    body = "\n".join(" ".join(s) + "\t" + " ".join(t) for s, t in pairs).encode()
    cache = cache_root(cache_dir) / "alignments"
    path = cache / f"eflomal-{hashlib.sha256(body).hexdigest()[:24]}.json.gz"
    with exclusive(cache / f".{path.name}.lock", _cache_error):
        if not path.exists():
            write_atomically(path, gzip.compress(json.dumps(_run_eflomal(pairs)).encode()))
    return read_links(path, [(len(s), len(t)) for s, t in pairs])


def _cache_error(key: str, message: str, source: str) -> CorpusError:
    return CorpusError(f"{source}: {message} (eflomal's cached links: delete the file and they are computed again)")


def read_links(path: Path, lengths: list[tuple[int, int]]) -> list[Links]:
    """eflomal_links' cache through the one reader: a regular file in its folder, no link, bounded bytes, gunzipped
    to at most LINKS_BYTES (a few kB of gzip expand to gigabytes), JSON within the decoders' bounds, and one list of
    (source, target) index pairs per sentence pair, inside its sentences; anything else is one line."""
    limit = min(LINKS_BYTES, links_bound(lengths))
    body = read_regular(path, LINKS_BYTES, _cache_error, within=path.parent, what="more than links of a corpus")
    links = json_value(gunzip(body, limit, clip_path(path), _cache_error), clip_path(path), _cache_error)
    if not isinstance(links, list) or len(links) != len(lengths) or not all(map(_fits, links, lengths)):
        raise _cache_error("(file)", f"not eflomal's links of these {len(lengths):,} pairs", clip_path(path))
    return [[tuple(link) for link in sentence] for sentence in links]


def links_bound(lengths: list[tuple[int, int]]) -> int:
    """Bytes of JSON the links of these pairs can take: at most one link per source and per target word, each at
    most LINK_JSON_BYTES. A bound from the corpus, not LINKS_BYTES alone: 500 kB of gzip expand to 512 MB of
    `[0, 0]`s, which json.loads makes into ~100 million lists (gigabytes) before they are checked."""
    return 16 + sum((s + t) * LINK_JSON_BYTES + 8 for s, t in lengths)


def _fits(sentence: object, length: tuple[int, int]) -> bool:
    """One sentence's links: [source index, target index] pairs inside its source and target."""
    return isinstance(sentence, list) and all(
        isinstance(link, list)
        and len(link) == 2
        and all(type(i) is int for i in link)
        and 0 <= link[0] < length[0]
        and 0 <= link[1] < length[1]
        for link in sentence
    )


def _run_eflomal(pairs: list[tuple[list[str], list[str]]]) -> list[Links]:
    import eflomal

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "forward.links"
        eflomal.Aligner().align(
            [" ".join(s) for s, _ in pairs], [" ".join(t) for _, t in pairs], links_filename_fwd=str(out), quiet=True
        )
        lines = out.read_text().splitlines()
    return [[tuple(int(i) for i in link.split("-")) for link in line.split()] for line in lines]


def alignment_matrix(links: list[Links], src_len: int, tgt_len: int) -> Tensor:
    """A (B, tgt_len, src_len): A_ij = 1 / |links of target word i| on its linked source words (lecture 003:
    "if multiple source words align to the same target word, normalise so that sum_j A_ij = 1"); zero rows for
    unaligned target words and </s>."""
    matrix = torch.zeros(len(links), tgt_len, src_len)
    index = torch.tensor(
        [
            (row, tgt, src)
            for row, sentence in enumerate(links)
            for src, tgt in sentence
            if src < src_len and tgt < tgt_len
        ],
        dtype=torch.long,
    ).reshape(-1, 3)
    matrix[index[:, 0], index[:, 1], index[:, 2]] = 1.0  # one indexed write per batch, not one per link
    return matrix / matrix.sum(-1, keepdim=True).clamp_min(1.0)


def guided_alignment_loss(weights: Tensor, alignment: Tensor, tgt_words: Tensor) -> Tensor:
    """H(A, alpha) = -1/T_y sum_i sum_j A_ij log alpha_ij (lecture 003), averaged over the batch's sentences.

    weights, alignment (B, T, S); tgt_words (B,) the target length T_y of each sentence (words, no </s>).
    """
    alpha = weights.float().clamp_min(torch.finfo(torch.float32).tiny)  # a weight that underflowed: finite loss
    per_sentence = -torch.xlogy(alignment, alpha).sum(dim=(1, 2)) / tgt_words.clamp_min(1)
    return per_sentence.mean()  # a sentence without links counts 0
