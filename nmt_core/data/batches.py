"""Tokenising, vocabularies and length-bucketed batches for one trial."""

from __future__ import annotations

import io
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from nmt_core.config import DataConfig
from nmt_core.data.alignment import alignment_matrix, eflomal_links
from nmt_core.data.corpora import Corpus, CorpusError, load_corpus
from nmt_core.data.tokens import detokenize_joined, tokenize, word_tokens
from nmt_core.models.rnn import BOS, EOS, PAD, UNK, host_to_device

SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]


class Segmenter:
    """Text <-> tokens for one side: words (`word`, `space`) or SentencePiece pieces (`sentencepiece`).

    BLEU is always computed on `detokenize`d text against the raw reference: `word` tokens are joined back
    exactly (joiners), `space` tokens by spaces (the text was tokenised to begin with), pieces are decoded.
    """

    def __init__(self, cfg: DataConfig, model: bytes | None = None):
        self.cfg, self.model = cfg, model
        self._processor = None
        if cfg.tokenizer == "sentencepiece":
            import sentencepiece

            if model is None:
                raise ValueError("a sentencepiece segmenter needs its trained model")
            self._processor = sentencepiece.SentencePieceProcessor(model_proto=model)

    @classmethod
    def train(cls, cfg: DataConfig, texts: list[str]) -> Segmenter:
        """Words need no training; SentencePiece learns a unigram model of data.subword_vocab pieces."""
        if cfg.tokenizer != "sentencepiece":
            return cls(cfg)
        import sentencepiece

        model = io.BytesIO()
        lines = [t.lower() if cfg.lowercase else t for t in texts]
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=model,
            vocab_size=cfg.subword_vocab,
            model_type="unigram",
            character_coverage=1.0,
            hard_vocab_limit=False,
            num_threads=1,
            minloglevel=2,
            unk_id=UNK,
            pad_id=PAD,
            bos_id=BOS,
            eos_id=EOS,
        )
        return cls(cfg, model.getvalue())

    def tokenize(self, text: str) -> list[str]:
        if self._processor is None:
            return tokenize(text, self.cfg)
        return self._processor.encode(text.lower() if self.cfg.lowercase else text, out_type=str)

    def detokenize(self, tokens: list[str]) -> str:
        if self._processor is not None:
            return self._processor.decode_pieces(tokens)
        return " ".join(tokens) if self.cfg.tokenizer == "space" else detokenize_joined(tokens)

    def paper_tokens(self, text: str) -> str:
        """Detokenised text as multi-bleu.perl sees it: space-separated words (what the SACT paper scored)."""
        return " ".join(text.split() if self.cfg.tokenizer == "space" else word_tokens(text))


class Vocab:
    """The K most frequent words (ties broken alphabetically, so vocabularies are reproducible)."""

    def __init__(self, words: list[str]):
        self.words = list(words)
        self.index = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def build(cls, sentences: list[list[str]], size: int, min_freq: int = 1) -> Vocab:
        counts = Counter(token for sentence in sentences for token in sentence)
        ranked = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
        return cls(SPECIALS + ranked[:size])

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, tokens: list[str]) -> list[int]:
        return [self.index.get(t, UNK) for t in tokens]

    def decode(self, ids: list[int]) -> list[str]:
        out = []
        for i in ids:
            if i == EOS:
                break
            if i not in (PAD, BOS):
                out.append(self.words[i])
        return out


@dataclass
class Example:
    src: list[int]
    tgt: list[int]  # without <s> and </s>
    links: list[tuple[int, int]] | None = None  # (source, target) word alignments, for guided alignment


@dataclass
class Batch:
    src: Tensor  # (B, S)
    src_lengths: Tensor  # (B,) on the CPU, for packing
    tgt_in: Tensor  # (B, T): <s> y_1 .. y_n
    tgt_out: Tensor  # (B, T): y_1 .. y_n </s>
    index: list[int]  # positions of these examples in their split
    n_tokens: int | Tensor  # real target tokens (</s> included); a device tensor inside a CUDA graph
    tgt_lengths: Tensor  # (B,) on the CPU: real tokens of each row of tgt_out (</s> included)
    alignment: Tensor | None = None  # (B, T, S) A_ij of guided alignment, when every example has links
    real: Tensor | None = None  # (n_tokens,) flat positions of the real tokens in tgt_out, found on the CPU

    def to(self, device: torch.device) -> Batch:
        """The batch on `device` (src_lengths and tgt_lengths stay on the CPU, where packing reads them)."""
        src, tgt_in, tgt_out, alignment, real = (
            None if t is None else host_to_device(t, device)
            for t in (self.src, self.tgt_in, self.tgt_out, self.alignment, self.real)
        )
        return Batch(
            src, self.src_lengths, tgt_in, tgt_out, self.index, self.n_tokens, self.tgt_lengths, alignment, real
        )

    def real_positions(self) -> Tensor:
        """Flat positions of the real target tokens; collate finds them on the CPU, so that a GPU never waits."""
        return self.real if self.real is not None else real_positions(self.tgt_out)


def real_positions(tgt_out: Tensor) -> Tensor:
    """(n_tokens,) flat positions of the non-padding tokens of tgt_out (B, T)."""
    return (tgt_out.flatten() != PAD).nonzero().squeeze(1)


def collate(examples: list[Example], index: list[int], bucket: int = 0) -> Batch:
    """The examples as one padded batch: to its longest source and target, or (`bucket` > 0) up to the next
    multiple of `bucket` tokens on each side, so that the batches of a length bucket share their shape."""
    batch = len(examples)
    src_len = padded_length(max(len(e.src) for e in examples), bucket)
    tgt_len = padded_length(max(len(e.tgt) for e in examples) + 1, bucket)
    src = torch.full((batch, src_len), PAD, dtype=torch.long)
    tgt_in = torch.full((batch, tgt_len), PAD, dtype=torch.long)
    tgt_out = torch.full((batch, tgt_len), PAD, dtype=torch.long)
    for row, e in enumerate(examples):
        src[row, : len(e.src)] = torch.tensor(e.src)
        tgt_in[row, : len(e.tgt) + 1] = torch.tensor([BOS] + e.tgt)
        tgt_out[row, : len(e.tgt) + 1] = torch.tensor(e.tgt + [EOS])
    lengths = torch.tensor([len(e.src) for e in examples])
    tgt_lengths = torch.tensor([len(e.tgt) + 1 for e in examples])
    links = [e.links for e in examples]
    alignment = None if any(link is None for link in links) else alignment_matrix(links, src_len, tgt_len)
    return Batch(
        src, lengths, tgt_in, tgt_out, index, int(tgt_lengths.sum()), tgt_lengths, alignment, real_positions(tgt_out)
    )


def padded_length(length: int, bucket: int) -> int:
    """`length` rounded up to a multiple of `bucket` (0: not rounded)."""
    return -(-length // bucket) * bucket if bucket else length


def bucket_width(max_len: int, buckets: int) -> int:
    """The width in tokens of each of `buckets` length buckets covering sentences of up to max_len tokens (targets
    carry one more, </s>); 0 when `buckets` is 0 (no buckets)."""
    return -(-(max_len + 1) // buckets) if buckets else 0


def make_batches(
    examples: list[Example],
    batch_size: int,
    token_budget: int = 0,
    shuffle_seed: int | None = None,
    width: Callable[[Example], int] | None = None,
    bucket: int = 0,
) -> list[Batch]:
    """Batches of similar length; the same seed gives the same batches.

    `bucket` > 0 (`train.buckets`): length buckets `bucket` tokens wide on each side; a batch holds examples of one
    (source bucket, target bucket) and is padded to the bucket's lengths, so that every batch of a bucket has one
    shape (but for the bucket's last, smaller one): a CUDA graph captured once per shape replays for all of them.
    `bucket` 0: the order before buckets, sorted by length inside pools of 50 batches, each batch padded to its
    longest example. With a seed, examples and batches are shuffled; without one (evaluation) the order is by length
    and stable. A token budget bounds the widest example's `width` (default: its source and target tokens) times
    the batch's examples.
    """
    width = width or (lambda e: len(e.src) + len(e.tgt) + 1)
    order = list(range(len(examples)))
    rng = random.Random(shuffle_seed)
    if shuffle_seed is not None:
        rng.shuffle(order)
    if bucket:
        groups = by_bucket(examples, order, batch_size, token_budget, width, bucket)
    else:
        groups = by_pool(examples, order, batch_size, token_budget, width)
    if shuffle_seed is not None:
        rng.shuffle(groups)
    return [collate([examples[i] for i in g], g, bucket) for g in groups]


def by_pool(
    examples: list[Example], order: list[int], batch_size: int, token_budget: int, width: Callable
) -> list[list[int]]:
    """Groups of examples sorted by length inside pools of 50 batches, cut at batch_size or the token budget."""
    pool = batch_size * 50
    order = [
        i
        for start in range(0, len(order), pool)
        for i in sorted(order[start : start + pool], key=lambda i: (len(examples[i].src), len(examples[i].tgt)))
    ]
    groups, group, widest = [], [], 0
    for i in order:
        size = width(examples[i])
        too_many_tokens = token_budget and max(widest, size) * (len(group) + 1) > token_budget
        if group and (len(group) == batch_size or too_many_tokens):
            groups.append(group)
            group, widest = [], 0
        group.append(i)
        widest = max(widest, size)
    if group:
        groups.append(group)
    return groups


def by_bucket(
    examples: list[Example], order: list[int], batch_size: int, token_budget: int, width: Callable, bucket: int
) -> list[list[int]]:
    """Groups of examples of one (source, target) length bucket, in `order` within it. A bucket's groups have
    the same number of rows (batch_size, or what the token budget allows its widest example), its last the rest:
    the same for every epoch, since a bucket holds the same examples."""
    buckets: dict[tuple[int, int], list[int]] = {}
    for i in order:
        e = examples[i]
        buckets.setdefault((padded_length(len(e.src), bucket), padded_length(len(e.tgt) + 1, bucket)), []).append(i)
    groups = []
    for key in sorted(buckets):
        members = buckets[key]
        rows = batch_size
        if token_budget:
            rows = max(1, min(batch_size, token_budget // max(width(examples[i]) for i in members)))
        groups += [members[start : start + rows] for start in range(0, len(members), rows)]
    return groups


def cut_long(sentences: list[list[str]], limit: int, where: str, log: Callable[[str], None]) -> list[list[str]]:
    """Sentences cut to `limit` tokens, with one line naming the lines that were longer.

    Decoding's attention traces and the dev loss grow with the square of a sentence's length: one unbounded line
    (100,000 characters) would ask for tens of GB."""
    long = [n for n, sentence in enumerate(sentences, 1) if len(sentence) > limit]
    if long:
        lines = ", ".join(map(str, long[:10])) + (f" and {len(long) - 10:,} more" if len(long) > 10 else "")
        log(
            f"{where}: line{'s' * (len(long) > 1)} {lines} longer than decode.max_src_len={limit} tokens: "
            f"only the first {limit} are used"
        )
    return [sentence[:limit] for sentence in sentences]


@dataclass
class TrialData:
    corpus: Corpus
    src_vocab: Vocab
    tgt_vocab: Vocab
    src_segmenter: Segmenter
    tgt_segmenter: Segmenter
    splits: dict[str, list[Example]]  # ids, after the length filter on train
    references: dict[str, list[str]]  # the corpus' raw target text of every dev/test pair kept (what BLEU reads)
    sources: dict[str, list[str]]  # their raw source text (shown beside the translations)
    alignments: dict[str, list[list[tuple[int, int]]]]  # gold links of dev/test pairs, where the corpus has them

    @property
    def test_sets(self) -> list[str]:
        return self.corpus.test_sets


def encode_split(
    pairs: list[tuple[list[str], list[str]]],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    links: list[list[tuple[int, int]]] | None = None,
) -> list[Example]:
    return [
        Example(src_vocab.encode(s), tgt_vocab.encode(t), links[i] if links else None) for i, (s, t) in enumerate(pairs)
    ]


def load_trial_data(
    cfg: DataConfig,
    vocabs: tuple[Vocab, Vocab] | None = None,
    subword_models: tuple[bytes | None, bytes | None] | None = None,
    training_links: bool = False,
    eval_max_len: int = 0,
    log: Callable[[str], None] = print,
) -> TrialData:
    """Tokenise a corpus, drop empty and over-long training pairs, build (or reuse) segmenters and vocabularies.

    `training_links`: training examples carry word alignments (guided alignment): the corpus's gold links when
    they index these tokens, else eflomal's (nmt_core.data.alignment). `eval_max_len` > 0: dev and test sentences are
    cut to that many tokens a side (`log` names them); BLEU still reads the whole reference."""
    corpus = load_corpus(cfg.corpus, cfg.src, cfg.tgt, cfg.cache_dir)
    segmenters = _segmenters(cfg, corpus, subword_models)
    # gold links index the corpus' own tokens: usable only when we split exactly as the corpus does
    gold = corpus.alignments if corpus.alignments and cfg.tokenizer == "space" else {}
    tokenized, alignments, references, sources = {}, {}, {}, {}
    train_links: list[list[tuple[int, int]]] | None = None
    for split, pairs in corpus.splits.items():
        rows = _split_rows(cfg, split, pairs, gold.get(split), segmenters, eval_max_len, log)
        toks = [(s, t) for s, t, _, _ in rows]
        if split == "train" and training_links:
            train_links = [a for _, _, a, _ in rows] if split in gold else eflomal_links(toks, cfg.cache_dir)
        if split != "train":
            sources[split] = [raw[0] for _, _, _, raw in rows]
            references[split] = [raw[1] for _, _, _, raw in rows]
            if split in gold:
                alignments[split] = [a for _, _, a, _ in rows]
        tokenized[split] = toks
    src_vocab, tgt_vocab = vocabs or _vocabularies(cfg, tokenized["train"])
    splits = {
        split: encode_split(toks, src_vocab, tgt_vocab, train_links if split == "train" else None)
        for split, toks in tokenized.items()
    }
    return TrialData(corpus, src_vocab, tgt_vocab, *segmenters, splits, references, sources, alignments)


def _segmenters(
    cfg: DataConfig, corpus: Corpus, subword_models: tuple[bytes | None, bytes | None] | None
) -> tuple[Segmenter, Segmenter]:
    """Source and target segmenters: trained on the training split, or rebuilt from a checkpoint's models."""
    if subword_models is not None:
        src_seg, tgt_seg = (Segmenter(cfg, model) for model in subword_models)
        return src_seg, tgt_seg
    train_pairs = corpus.splits["train"][: cfg.train_subset or None]
    return Segmenter.train(cfg, [s for s, _ in train_pairs]), Segmenter.train(cfg, [t for _, t in train_pairs])


def _split_rows(
    cfg: DataConfig,
    split: str,
    pairs: list[tuple[str, str]],
    links: list | None,
    segmenters: tuple[Segmenter, Segmenter],
    eval_max_len: int,
    log: Callable[[str], None],
) -> list[tuple[list[str], list[str], Any, tuple[str, str]]]:
    """(source tokens, target tokens, gold links, raw pair) of one split's kept pairs: the subset, dev and test
    sentences cut to eval_max_len, empty lines removed pairwise, training pairs over data.max_len dropped."""
    src_seg, tgt_seg = segmenters
    limit = cfg.train_subset if split == "train" else cfg.eval_subset
    rows = [
        (src_seg.tokenize(s), tgt_seg.tokenize(t), a, (s, t))
        for (s, t), a in list(zip(pairs, links or [None] * len(pairs)))[: limit or None]
    ]
    if split != "train" and eval_max_len:
        sides = [
            cut_long([row[side] for row in rows], eval_max_len, f"{cfg.corpus} {split} {name}", log)
            for side, name in ((0, "source"), (1, "target"))
        ]
        rows = [(s, t, a, raw) for s, t, (_, _, a, raw) in zip(*sides, rows)]
    rows = [row for row in rows if row[0] and row[1]]  # empty lines are removed pairwise
    if split == "train":
        rows = [row for row in rows if len(row[0]) <= cfg.max_len and len(row[1]) <= cfg.max_len]
    if not rows:
        raise CorpusError(
            f"{cfg.corpus}: split {split!r} has no sentence pairs left "
            f"(after removing empty lines and pairs longer than data.max_len={cfg.max_len})"
        )
    return rows


def _vocabularies(cfg: DataConfig, train: list[tuple[list[str], list[str]]]) -> tuple[Vocab, Vocab]:
    """The source and target vocabularies of the training split; an empty one is an error naming data.min_freq."""
    src_vocab = Vocab.build([s for s, _ in train], cfg.src_vocab, cfg.min_freq)
    tgt_vocab = Vocab.build([t for _, t in train], cfg.tgt_vocab, cfg.min_freq)
    for side, vocab in (("source", src_vocab), ("target", tgt_vocab)):
        if len(vocab) == len(SPECIALS):
            raise CorpusError(
                f"{cfg.corpus}: the {side} vocabulary is empty "
                f"(no training word occurs data.min_freq={cfg.min_freq} times)"
            )
    return src_vocab, tgt_vocab
