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

from nmt_core.corpora import cache_root, exclusive, write_atomically

Links = list[tuple[int, int]]  # (source index, target index) pairs of one sentence


def eflomal_links(pairs: list[tuple[list[str], list[str]]], cache_dir: str) -> list[Links]:
    """eflomal's forward links for tokenised pairs, computed once per distinct set of pairs and cached."""
    body = "\n".join(" ".join(s) + "\t" + " ".join(t) for s, t in pairs).encode()
    cache = cache_root(cache_dir) / "alignments"
    path = cache / f"eflomal-{hashlib.sha256(body).hexdigest()[:24]}.json.gz"
    with exclusive(cache / f".{path.name}.lock"):
        if not path.exists():
            write_atomically(path, gzip.compress(json.dumps(_run_eflomal(pairs)).encode()))
    return [[tuple(link) for link in links] for links in json.loads(gzip.decompress(path.read_bytes()))]


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
