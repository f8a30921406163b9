import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from sacrebleu.metrics import BLEU

from nmt_core.decode import Translation
from nmt_core.evaluate import corpus_bleu, paired_bootstrap, trace_table, write_traces

REFS = [f"the cat number {i} sat on the mat today" for i in range(60)]


def test_bleu_matches_sacrebleu_and_carries_its_signature():
    hyps = [r.replace("mat", "rug") for r in REFS]
    result = corpus_bleu(hyps, REFS, tokenize="none", lowercase=True)
    assert result.score == pytest.approx(BLEU(tokenize="none", lowercase=True).corpus_score(hyps, [REFS]).score)
    assert "tok:none" in result.signature and "case:lc" in result.signature


def test_paired_bootstrap_marks_a_clearly_better_system():
    baseline = [r.replace("sat on", "is near").replace("today", "") for r in REFS]
    system = [r if i % 4 else r.replace("today", "") for i, r in enumerate(REFS)]
    result = paired_bootstrap(baseline, system, REFS, resamples=300)
    full = BLEU()
    assert result.delta == pytest.approx(full.corpus_score(system, [REFS]).score
                                         - full.corpus_score(baseline, [REFS]).score)
    assert result.p_value < 0.01 and result.mark == "**"


def test_paired_bootstrap_finds_no_difference_between_equal_systems():
    hyps = [r.replace("cat", "dog") if i % 2 else r for i, r in enumerate(REFS)]
    result = paired_bootstrap(hyps, hyps, REFS, resamples=200)
    assert result.delta == 0 and result.p_value == 1.0 and result.mark == ""


def test_trace_table_schema_and_parquet_round_trip(tmp_path):
    weights = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    translations = [Translation([5, 6], -1.0, weights, [0.5, 2.0], None)]
    table = trace_table(translations, [["hello", "world"]])
    path = tmp_path / "dev.parquet"
    write_traces(table, str(path))
    rows = pq.read_table(path).to_pylist()
    assert [r["token"] for r in rows] == ["hello", "world"]
    assert [r["argmax_src"] for r in rows] == [0, 2]
    assert rows[0]["tau"] == 0.5 and rows[0]["sentinel"] is None
    assert rows[1]["weights"] == pytest.approx([0.1, 0.1, 0.8])
    assert rows[0]["entropy"] == pytest.approx(-(0.7 * torch.tensor(0.7).log() + 0.2 * torch.tensor(0.2).log()
                                                 + 0.1 * torch.tensor(0.1).log()).item(), rel=1e-5)


def test_alignment_error_rate_on_a_hand_made_alignment():
    from nmt_core.evaluate import alignment_error_rate, attention_alignment

    sure = {(0, 0), (1, 2), (2, 1)}
    assert alignment_error_rate(sure, sure) == 0.0
    assert alignment_error_rate({(0, 0), (1, 1)}, sure) == pytest.approx(1 - 2 / 5)  # 1 of 2 right, 3 gold
    assert alignment_error_rate({(0, 0), (1, 1)}, sure, possible={(1, 1)}) == pytest.approx(1 - 3 / 5)
    # attention: target word 0 looks at source 0, word 1 at source 2, word 2 at source 2 (gold says 1)
    weights = np.array([[0.8, 0.1, 0.1], [0.1, 0.2, 0.7], [0.3, 0.3, 0.4]])
    score = attention_alignment([weights], [[(0, 0), (2, 1), (1, 2)]])
    assert score.aer == pytest.approx(1 - 4 / 6)  # predicted {(0,0),(2,1),(2,2)}: 2 of 3 right
    assert score.gold_mass == pytest.approx((0.8 + 0.7 + 0.3) / 3)
