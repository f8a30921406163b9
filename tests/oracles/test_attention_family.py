"""The rest of the attention family as sweepable keys: every sensible combination with every score, temperature
and the sentinel runs and learns; teacher forcing equals step-by-step decoding; beam search runs; the
combinations that make no sense, and the other bad inputs, are refused in one line naming the key."""

import importlib.util
import itertools
import subprocess
import sys

import pytest
import torch

from nmt_core.config import CHOICES, ConfigError, build_config
from nmt_core.data.batches import Example, collate
from nmt_core.family.parts import POSITION_BIASES
from nmt_core.models.rnn import Seq2Seq
from nmt_core.training.decode import beam_search, greedy
from sweeper.cli import main as sweeper_main
from tests.conftest import tiny_config
from tests.oracles.test_attention import (
    SCORES_UNDER_TEST,
    TEMPERATURES_UNDER_TEST,
    _batch,
    assert_teacher_forcing_matches_steps,
)

# (attention keys, model keys) of each new variant
FAMILY = {
    "bahdanau": ({"placement": "bahdanau"}, {}),
    "cgru": ({"placement": "cgru"}, {"cell": "gru"}),
    "cgru_lstm": ({"placement": "cgru"}, {}),
    "log_position": ({"position_bias": "log"}, {}),
    "gaussian": ({"position_bias": "gaussian"}, {}),
    "intra_temporal": ({"intra_temporal": True}, {}),
    "encoder_self": ({"self_attention": "encoder"}, {}),
    "decoder_self": ({"self_attention": "decoder"}, {}),
    "both_self": ({"self_attention": "both"}, {}),
    "fertility": ({"coverage": True, "coverage_weight": 0.5, "fertility": True}, {}),
}


def test_position_biases_registered_as_the_config_allows():
    assert sorted(POSITION_BIASES) == sorted(CHOICES["attention.position_bias"]) == ["gaussian", "log", "none"]


def _config(name, score, temperature, sentinel):
    attention, model = FAMILY[name]
    return tiny_config(
        attention={**attention, "score": score, "temperature": temperature, "sentinel": sentinel, "tau": 0.8},
        model=model,
    )


def _combinations():
    """Every variant x score x temperature x sentinel the config accepts, and the ones it refuses."""
    accepted, refused = [], []
    for combo in itertools.product(FAMILY, SCORES_UNDER_TEST, TEMPERATURES_UNDER_TEST, [False, True]):
        try:
            _config(*combo)
            accepted.append(combo)
        except ConfigError as err:
            refused.append((combo, err.key))
    return accepted, refused


ACCEPTED, REFUSED = _combinations()


def test_only_the_combinations_without_meaning_are_refused():
    """Refused: the sentinel away from Luong's placement (it mixes in t_i, the state after the RNN step), the
    sentinel with key-value and coverage (hence fertility) outside the additive score, as before."""
    for (name, score, _, sentinel), key in REFUSED:
        placement = FAMILY[name][0].get("placement", "luong")
        assert (sentinel and (placement != "luong" or score == "key_value")) or (
            name == "fertility" and score != "concat"
        ), (name, score, sentinel, key)
    assert len(ACCEPTED) == 284  # of 10 x 5 x 4 x 2 = 400


@pytest.mark.parametrize("name, score, temperature, sentinel", ACCEPTED)
def test_every_combination_runs_and_every_parameter_learns(name, score, temperature, sentinel):
    cfg = _config(name, score, temperature, sentinel)
    torch.manual_seed(0)
    model = Seq2Seq(cfg.model, cfg.attention, 30, 20)
    src, lengths, tgt = _batch()
    logits, trace = model(src, lengths, tgt)
    assert torch.isfinite(logits).all() and torch.isfinite(trace.weights).all()
    loss = logits.logsumexp(-1).sum()
    if trace.fertility is not None:
        loss = loss + trace.fertility.sum()
    loss.backward()
    assert [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0] == []


@pytest.mark.parametrize("name", FAMILY)
@pytest.mark.parametrize("score", ["general", "concat"])
def test_teacher_forcing_matches_step_by_step_decoding(name, score):
    """With SACT, and the sentinel wherever the variant takes it."""
    sentinel = FAMILY[name][0].get("placement", "luong") == "luong"
    try:
        cfg = _config(name, score, "sact", sentinel)
    except ConfigError:
        pytest.skip("refused combination (see test_only_the_combinations_without_meaning_are_refused)")
    assert_teacher_forcing_matches_steps(cfg)


@pytest.mark.parametrize("name", FAMILY)
def test_beam_search_runs_and_beam_one_is_greedy(name):
    cfg = _config(name, "concat", "none", False)
    torch.manual_seed(0)
    model = Seq2Seq(cfg.model, cfg.attention, 30, 20).eval()
    examples = [Example([5, 6, 7, 8], [4]), Example([9, 10], [4]), Example([11, 12, 13], [4])]
    batch = collate(examples, [0, 1, 2])
    beams = beam_search(model, batch, cfg.decode, 4)
    assert len(beams) == 3 and all(b.weights.shape[0] == len(b.tokens) for b in beams)
    for g, b in zip(greedy(model, batch, cfg.decode), beam_search(model, batch, cfg.decode, 1)):
        assert g.tokens == b.tokens


@pytest.mark.parametrize(
    "keys, key, says",
    [
        ({"attention": {"placement": "sideways"}}, "attention.placement", "one of luong, bahdanau, cgru"),
        ({"attention": {"position_bias": "cosine"}}, "attention.position_bias", "one of none, log, gaussian"),
        ({"attention": {"self_attention": "all"}}, "attention.self_attention", "one of none, encoder, decoder, both"),
        ({"attention": {"score": "concat", "fertility": True}}, "attention.fertility", "unless attention.coverage"),
        (
            {"attention": {"placement": "bahdanau", "sentinel": True}},
            "attention.sentinel",
            "attention.placement bahdanau",
        ),
        (
            {"attention": {"placement": "cgru"}, "model": {"decoder_layers": 2}},
            "model.decoder_layers",
            "placement cgru",
        ),
        ({"train": {"symmetry_weight": -1}}, "train.symmetry_weight", ">= 0"),
    ],
)
def test_bad_values_and_combinations_name_the_keys(keys, key, says):
    with pytest.raises(ConfigError) as err:
        build_config(keys)
    assert err.value.key == key and says in str(err.value) and "\n" not in str(err.value)


def test_guided_alignment_without_alignments_or_eflomal_says_how_to_install_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "eflomal" else real(name, *a))
    with pytest.raises(ConfigError) as err:
        build_config({"data": {"corpus": "tatoeba-en-es"}, "train": {"guided_alignment": 0.5}})
    assert err.value.key == "train.guided_alignment" and "pip install" in str(err.value) and "eflomal" in str(err.value)
    build_config({"data": {"corpus": "bible-grc-en", "tokenizer": "space"}, "train": {"guided_alignment": 0.5}})


def test_nmt_train_and_sweeper_validate_refuse_in_one_line_with_exit_2(tmp_path, capsys):
    config = tmp_path / "bad.yaml"
    config.write_text("attention: {placement: bahdanau, sentinel: true}\n")
    done = subprocess.run(
        [sys.executable, "-m", "nmt_core.cli", "train", str(config), "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "attention.sentinel" in done.stderr and "attention.placement bahdanau" in done.stderr
    assert not (tmp_path / "run").exists()
    space = tmp_path / "space.yaml"
    space.write_text(
        "name: bad\ndata: {corpus: synthetic}\nbase: {attention: {score: dot}}\n"
        "parameters:\n  attention.fertility: {grid: [false, true]}\n"
    )
    assert sweeper_main(["validate", str(space)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "attention.fertility" in err and "attention.coverage" in err
