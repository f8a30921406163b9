import random

import pytest

from nmt_core.config import build_config
from nmt_core.data.batches import (
    Example,
    Segmenter,
    Vocab,
    bucket_width,
    load_trial_data,
    make_batches,
    padded_length,
    tokenize,
    word_tokens,
)
from nmt_core.data.corpora import CorpusError, load_corpus
from nmt_core.models.rnn import EOS, PAD


def _write(folder, name, lines):
    (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def iwslt_folder(tmp_path):
    """The IWSLT'15 release layout: train, tst2012 (dev), tst2013 (test)."""
    for split, n in (("train", 30), ("tst2012", 5), ("tst2013", 6)):
        _write(tmp_path, f"{split}.en", [f"the house number {i} is red ." for i in range(n)])
        _write(tmp_path, f"{split}.vi", [f"ngôi nhà số {i} màu đỏ ." for i in range(n)])
    return tmp_path


def test_iwslt_layout_reads_tst2012_as_dev_and_tst2013_as_test(iwslt_folder):
    corpus = load_corpus(str(iwslt_folder), "en", "vi")
    assert list(corpus.splits) == ["train", "dev", "tst2013"]
    assert len(corpus.splits["dev"]) == 5 and corpus.test_sets == ["tst2013"]


def test_mismatched_line_counts_name_both_files(iwslt_folder):
    _write(iwslt_folder, "train.vi", ["one line"])
    with pytest.raises(CorpusError, match=r"train\.en: 30 lines but train\.vi has 1"):
        load_corpus(str(iwslt_folder), "en", "vi")


def test_missing_split_names_the_file(iwslt_folder):
    (iwslt_folder / "tst2013.vi").unlink()
    with pytest.raises(CorpusError, match=r"tst2013\.vi: missing"):
        load_corpus(str(iwslt_folder), "en", "vi")


def test_undecodable_bytes_name_file_and_line(iwslt_folder):
    (iwslt_folder / "train.vi").write_bytes(b"ok\nok\n\xff\xfe bad\n" + b"ok\n" * 27)
    with pytest.raises(CorpusError, match=r"train\.vi: not UTF-8 \(undecodable byte on line 3\)"):
        load_corpus(str(iwslt_folder), "en", "vi")


def test_empty_vocabulary_is_an_error(iwslt_folder):
    cfg = build_config({"data": {"corpus": str(iwslt_folder), "src": "en", "tgt": "vi", "min_freq": 1000}})
    with pytest.raises(CorpusError, match="vocabulary is empty"):
        load_trial_data(cfg.data)


def test_missing_folder_and_unknown_name():
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus("./no/such/folder", "en", "vi")
    with pytest.raises(CorpusError, match="unknown corpus 'wmt99'.*tatoeba-en-es"):
        load_corpus("wmt99", "en", "vi", cache_dir="/tmp/never-used")


def test_empty_lines_are_removed_pairwise_and_long_pairs_filtered(tmp_path):
    for split in ("train", "dev", "test"):
        _write(tmp_path, f"{split}.en", ["a b", "", "c d", "x " * 60])
        _write(tmp_path, f"{split}.de", ["A B", "lost", "", "X " * 60])
    cfg = build_config({"data": {"corpus": str(tmp_path), "src": "en", "tgt": "de", "max_len": 50}})
    data = load_trial_data(cfg.data)
    assert len(data.splits["train"]) == 1  # empty sides and the 60-word pair are gone
    assert len(data.splits["dev"]) == 2  # dev keeps long pairs, drops only the empty ones


def test_vocabulary_keeps_the_k_most_frequent_words():
    vocab = Vocab.build([["a", "b", "a", "c"], ["a", "b", "d"]], size=2)
    assert vocab.words == ["<pad>", "<unk>", "<s>", "</s>", "a", "b"]
    assert vocab.encode(["a", "zzz"]) == [4, 1]
    assert vocab.decode([4, 5, EOS, 4]) == ["a", "b"]


def test_word_tokenizer_splits_punctuation_and_keeps_contractions():
    cfg = build_config({}).data
    assert tokenize("Don't go, Tom!", cfg) == ["Don't", "go", "￭,", "Tom", "￭!"]
    assert tokenize("¿Dónde está?", cfg) == ["¿￭", "Dónde", "está", "￭?"]  # words keep one vocabulary entry
    assert tokenize("already tokenised , text", build_config({"data": {"tokenizer": "space"}}).data) == [
        "already",
        "tokenised",
        ",",
        "text",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Don't go, Tom!",
        "¿Dónde está? «Aquí», dijo.",
        "well-known (really) 3.5 km...",
        "Tom's dog — it's 10:30.",
        "a  b\tc",
        "",
        "...",
    ],
)
def test_word_detokenizer_restores_the_text_exactly(text):
    cfg = build_config({}).data
    segmenter = Segmenter(cfg)
    assert segmenter.detokenize(segmenter.tokenize(text)) == " ".join(text.split())
    assert segmenter.paper_tokens(text) == " ".join(word_tokens(text))


def _examples(n=300):
    return [Example(list(range(4, 4 + 1 + i % 17)), list(range(4, 4 + 1 + i % 11))) for i in range(n)]


def test_same_seed_same_batches_other_seed_other_batches():
    first, again, other = (make_batches(_examples(), 16, shuffle_seed=s) for s in (5, 5, 6))
    assert [b.index for b in first] == [b.index for b in again]
    assert [b.index for b in first] != [b.index for b in other]
    assert sorted(i for b in first for i in b.index) == list(range(300))


def test_batches_group_similar_lengths_and_respect_the_token_budget():
    examples = _examples()
    batches = make_batches(examples, 64, token_budget=200, shuffle_seed=1)
    assert max(len(b.index) for b in batches) < 64  # the budget, not the batch size, decided
    for batch in batches:
        widest = max(len(examples[i].src) + len(examples[i].tgt) + 1 for i in batch.index)
        assert widest * len(batch.index) <= 200
        lengths = batch.src_lengths.tolist()
        assert max(lengths) - min(lengths) <= 2
    batch = batches[0]
    assert (batch.tgt_out == EOS).sum() == batch.src.size(0)
    assert batch.n_tokens == int((batch.tgt_out != PAD).sum())


def test_length_buckets_give_every_batch_of_a_bucket_one_shape():
    """train.buckets: a batch holds one (source, target) bucket, padded to the bucket's lengths; a bucket's batches
    all have batch_size rows but its last; every example comes once; the same seed gives the same batches."""
    examples = _examples()
    batches = make_batches(examples, 8, shuffle_seed=3, bucket=5)
    assert sorted(i for b in batches for i in b.index) == list(range(300))
    shapes: dict[tuple[int, int], list[int]] = {}
    for batch in batches:
        src_len, tgt_len = batch.src.size(1), batch.tgt_out.size(1)
        assert src_len % 5 == 0 and tgt_len % 5 == 0
        for i in batch.index:  # each example in its own bucket, the smallest that holds it
            assert src_len - 5 < len(examples[i].src) <= src_len
            assert tgt_len - 5 < len(examples[i].tgt) + 1 <= tgt_len
        shapes.setdefault((src_len, tgt_len), []).append(batch.src.size(0))
    for rows in shapes.values():
        assert sum(r != 8 for r in rows) <= 1  # all full but the bucket's last
    assert len(shapes) < len(batches)
    again = make_batches(examples, 8, shuffle_seed=3, bucket=5)
    assert [b.index for b in again] == [b.index for b in batches]
    assert [b.index for b in make_batches(examples, 8, shuffle_seed=4, bucket=5)] != [b.index for b in batches]
    padded = batches[0]
    assert padded.n_tokens == int((padded.tgt_out != PAD).sum()) and (padded.tgt_out == EOS).sum() == len(padded.index)


def test_a_bucket_has_the_same_batch_shapes_in_every_epoch():
    """The shapes a captured step meets: the same set every epoch (a bucket holds the same examples), and with a
    token budget a bucket's batches still share their row count."""
    examples = _examples()

    def shapes(seed: int) -> set[tuple[int, ...]]:
        return {tuple(b.tgt_out.shape) + tuple(b.src.shape) for b in make_batches(examples, 16, 200, seed, bucket=4)}

    assert shapes(1) == shapes(2) == shapes(3)
    for batch in make_batches(examples, 16, 200, 1, bucket=4):
        widest = max(len(examples[i].src) + len(examples[i].tgt) + 1 for i in batch.index)
        assert widest * len(batch.index) <= 200


def test_no_buckets_keeps_the_order_before_buckets():
    """train.buckets: 0 is the batching every earlier trial had: pools of 50 batches sorted by length, each batch
    padded to its longest example, so a seeded trial reproduces its earlier runs."""
    examples = _examples()
    batches = make_batches(examples, 16, shuffle_seed=5)
    rng = random.Random(5)
    order = list(range(len(examples)))
    rng.shuffle(order)
    expected = sorted(order, key=lambda i: (len(examples[i].src), len(examples[i].tgt)))  # one pool: 300 < 800
    groups = [expected[start : start + 16] for start in range(0, len(expected), 16)]
    rng.shuffle(groups)
    assert [b.index for b in batches] == groups
    for batch in batches:
        assert batch.src.size(1) == max(len(examples[i].src) for i in batch.index)
        assert batch.tgt_out.size(1) == max(len(examples[i].tgt) for i in batch.index) + 1


def test_bucket_width_covers_max_len_and_its_end_of_sentence_token():
    assert bucket_width(50, 0) == 0
    assert bucket_width(50, 5) == 11  # 5 buckets of 11 tokens cover 51: 50 words and </s>
    assert bucket_width(50, 51) == 1
    assert padded_length(12, 11) == 22 and padded_length(11, 11) == 11 and padded_length(7, 0) == 7
