import pytest

from nmt_core.config import TRANSFORMER_ONLY, ConfigError, build_config, load_config, parse_overrides


@pytest.mark.parametrize(
    "raw, key, allowed",
    [
        ({"attention": {"lambda": 1.0}}, "attention.lambda", "> 1"),
        ({"attention": {"lambda": 0.5}}, "attention.lambda", "> 1"),
        ({"attention": {"tau": 0}}, "attention.tau", "> 0"),
        ({"attention": {"coverage": True}}, "attention.coverage", "false unless attention.score is concat"),
        (
            {"attention": {"score": "key_value", "sentinel": True}},
            "attention.sentinel",
            "false with attention.score key_value",
        ),
        ({"attention": {"score": "key_value"}, "model": {"readout": "sum"}}, "model.readout", "luong or auto"),
        ({"attention": {"score": "key_value"}, "model": {"hidden_size": 18}}, "model.hidden_size", "multiple of 4"),
        ({"model": {"readout": "mean"}}, "model.readout", "auto, luong, sum"),
        ({"attention": {"tau": -1.0}}, "attention.tau", "> 0"),
        ({"attention": {"score": "cosine"}}, "attention.score", "dot, general, concat, scaled_dot, key_value"),
        ({"attention": {"temperature": "hot"}}, "attention.temperature", "none, fixed, sact"),
        ({"model": {"cell": "rnn"}}, "model.cell", "lstm, gru"),
        ({"model": {"dropout": 1.0}}, "model.dropout", "[0, 1)"),
        ({"model": {"hidden_size": 15}}, "model.hidden_size", "even"),
        ({"attention": {"sentinal": True}}, "attention.sentinal", "sentinel"),
        ({"trian": {}}, "trian", "data, model, attention, train, decode"),
        ({"train": {"epochs": "ten"}}, "train.epochs", "integer"),
        ({"attention": {"sentinel": "yes"}}, "attention.sentinel", "true or false"),
    ],
)
def test_bad_values_name_the_key_and_what_is_allowed(raw, key, allowed):
    with pytest.raises(ConfigError) as err:
        build_config(raw, source="space.yaml")
    message = str(err.value)
    assert message.startswith(f"space.yaml: {key}: ")
    assert allowed in message
    assert "\n" not in message


def test_yaml_none_means_the_temperature_none():
    assert build_config({"attention": {"temperature": None}}).attention.temperature == "none"


def test_dotted_overrides_and_flat_keys(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("attention: {temperature: sact}\n")
    cfg = load_config(str(path), parse_overrides(["attention.lambda=6", "train.lr=1e-3", "model.cell=gru"]))
    flat = cfg.flat()
    assert flat["attention.lambda"] == 6.0 and flat["train.lr"] == 1e-3 and flat["model.cell"] == "gru"
    assert flat["attention.temperature"] == "sact"


def test_unreadable_yaml_names_the_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="broken.yaml"):
        load_config(str(path))


def test_active_settings_leave_out_what_the_variant_ignores():
    sact = build_config({"attention": {"temperature": "sact"}}).active()
    assert "attention.lambda" in sact and "attention.tau" not in sact and "attention.coverage_weight" not in sact
    fixed = build_config({"attention": {"temperature": "fixed", "tau": 2.0}, "train": {"lr_decay": 0.5}}).active()
    assert fixed["attention.tau"] == 2.0 and "attention.lambda" not in fixed and "train.lr_patience" in fixed
    assert set(build_config({}).flat()) - set(build_config({}).active()) == {
        "attention.tau",
        "attention.lambda",
        "attention.sact_bias",
        "attention.sact_base",  # SACT's and the learned temperature's base scale
        "attention.alpha",  # alpha-entmax
        "attention.cap",  # soft-capping
        "attention.entropy_threshold",  # entropy sharpening at decoding
        "attention.train_keys",  # Scalable-Softmax's fixed control, 1 / log(n_train)
        "attention.coverage_weight",
        "data.subword_vocab",
        "train.lr_patience",
        "train.warmup",
        *TRANSFORMER_ONLY,
    }
