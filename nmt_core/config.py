"""Typed trial configuration: one nested dict (data, model, attention, train, decode) validated once.

Every part of the project addresses options by dotted keys (`attention.lambda`), so validation errors
name the dotted key, the source file and what is allowed: users fix YAML, not Python tracebacks.
"""
from __future__ import annotations

import copy
import dataclasses
import importlib.util
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from nmt_core.yaml_input import SHOWN_CHARS, ErrorType, load_yaml_file, parse_yaml, shown


class ConfigError(ValueError):
    """Bad user input; the message is one line naming the file, the dotted key and what is allowed.

    Values in the message go through `shown`; a key is user input too and is cut here."""

    def __init__(self, key: str, message: str, source: str = "<config>"):
        key = key if len(key) <= SHOWN_CHARS else f"{key[:SHOWN_CHARS]}..."
        self.key, self.source = key, source
        super().__init__(f"{source}: {key}: {message}")


@dataclass
class DataConfig:
    corpus: str = "synthetic"
    src: str = "src"
    tgt: str = "tgt"
    tokenizer: str = "word"  # word: split punctuation off words; space: already tokenised; sentencepiece: subwords
    subword_vocab: int = 8000  # sentencepiece: pieces per side (a unigram model trained on the training split)
    lowercase: bool = False
    max_len: int = 50  # training pairs longer than this (tokens, either side) are dropped
    src_vocab: int = 17700
    tgt_vocab: int = 7000
    min_freq: int = 1
    train_subset: int = 0  # keep only the first N training pairs (0 = all): quick sweeps on a real corpus
    eval_subset: int = 0  # keep only the first N dev/test pairs (0 = all)
    cache_dir: str = ""  # where prepared corpora live; "" = $NMT_DATA_DIR or ~/.cache/nmt_sweeper


@dataclass
class ModelConfig:
    cell: str = "lstm"
    emb_size: int = 512
    hidden_size: int = 512
    encoder_layers: int = 1
    decoder_layers: int = 1
    dropout: float = 0.4
    input_feeding: bool = True
    readout: str = "auto"  # luong: tanh(W_c [c; s]) (Luong eq. 5); sum: c + s (Li & Zhu eq. 12); auto: sum with the sentinel
    tie_embeddings: bool = False
    fast_path: bool = True  # the same maths in fewer, larger ops (decoder steps, loss on real tokens); false: plain


@dataclass
class AttentionConfig:
    score: str = "general"
    temperature: str = "none"
    tau: float = 1.0
    lambda_: float = 4.0  # `lambda` in YAML and dotted keys (a Python keyword)
    sact_bias: bool = False  # SACT eq. 2 has none; a bias lets SACT learn one global temperature
    sentinel: bool = False
    coverage: bool = False
    coverage_weight: float = 0.0
    fertility: bool = False  # coverage towards f_j = N sigmoid(W_j h_j) instead of 1 (lecture 003)
    placement: str = "luong"  # luong: attend from s_t; bahdanau: from s_{t-1}, context into the RNN; cgru: dl4mt
    position_bias: str = "none"  # log: Cohn et al. 2016 log(1 + i) features; gaussian: a learned window (slides 001)
    intra_temporal: bool = False  # Paulus et al. 2017: scores divided by their past exponentiated scores
    self_attention: str = "none"  # encoder, decoder or both (course report 004)


@dataclass
class TrainConfig:
    lr: float = 3.0e-4
    batch_size: int = 64
    token_budget: int = 0  # > 0: batches hold at most this many source+target tokens (with padding)
    clip_norm: float = 10.0
    epochs: int = 12
    seed: int = 1
    label_smoothing: float = 0.0
    lr_decay: float = 1.0  # < 1: multiply lr by this when dev BLEU stops improving
    lr_patience: int = 1
    early_stopping: int = 0  # > 0: stop after this many epochs without a better dev BLEU
    max_steps_per_epoch: int = 0  # > 0: cap updates per epoch (smoke runs, benchmarks)
    device: str = "auto"
    amp: bool = False  # bf16 autocast (CUDA; a CPU with AVX-512 BF16 or AMX)
    guided_alignment: float = 0.0  # weight of H(A, alpha) against word alignments (gold, else eflomal's)
    symmetry_weight: float = 0.0  # > 0: train t->s jointly, with this weight on the trace bonus (Cohn et al. 2016)


@dataclass
class DecodeConfig:
    beam_size: int = 10
    dev_beam_size: int = 1  # dev BLEU every epoch: greedy by default, it is the cheap signal
    length_penalty: float = 1.0  # score / length**alpha
    max_len_ratio: float = 2.0
    max_len_offset: int = 10
    max_src_len: int = 256  # translation, dev/test sets: longer sentences are cut to this many tokens (with a warning)
    bleu_tokenize: str = "13a"
    bleu_lowercase: bool = False


@dataclass
class TrialConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    attention: AttentionConfig = field(default_factory=AttentionConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {f.name: {_yaml_key(k): v for k, v in dataclasses.asdict(getattr(self, f.name)).items()}
                for f in dataclasses.fields(self)}

    def flat(self) -> dict[str, Any]:
        return flatten(self.to_dict())

    def active(self) -> dict[str, Any]:
        """The flat config without the settings this variant ignores (`attention.lambda` without SACT, ...):
        MLflow's parameter views then compare what acted."""
        flat = self.flat()
        return {k: v for k, v in flat.items() if k not in INACTIVE_UNLESS or INACTIVE_UNLESS[k](flat)}


# a setting that acts only when its predicate on the flat config holds
INACTIVE_UNLESS: dict[str, Any] = {
    "attention.tau": lambda c: c["attention.temperature"] == "fixed",
    "attention.lambda": lambda c: c["attention.temperature"] == "sact",
    "attention.sact_bias": lambda c: c["attention.temperature"] == "sact",
    "attention.coverage_weight": lambda c: c["attention.coverage"],
    "model.input_feeding": lambda c: c["attention.placement"] == "luong",  # the others feed c_t instead
    "data.subword_vocab": lambda c: c["data.tokenizer"] == "sentencepiece",
    "train.lr_patience": lambda c: c["train.lr_decay"] < 1,
    "decode.length_penalty": lambda c: c["decode.beam_size"] > 1,
}

CHOICES: dict[str, tuple[str, ...]] = {
    "data.tokenizer": ("word", "space", "sentencepiece"),
    "model.cell": ("lstm", "gru"),
    "model.readout": ("auto", "luong", "sum"),
    "attention.score": ("dot", "general", "concat", "scaled_dot", "key_value"),
    "attention.temperature": ("none", "fixed", "sact"),
    "attention.placement": ("luong", "bahdanau", "cgru"),
    "attention.position_bias": ("none", "log", "gaussian"),
    "attention.self_attention": ("none", "encoder", "decoder", "both"),
    "train.device": ("auto", "cpu", "cuda"),
    "decode.bleu_tokenize": ("13a", "none", "intl", "char"),
}

GOLD_ALIGNED = ("bible-grc-en",)  # corpora that ship manual word alignments (they index `space` tokens)
INSTALL_EFLOMAL = "pip install 'nmt-sweeper[align]' (or: pip install eflomal)"

_SECTION_TYPES = {"data": DataConfig, "model": ModelConfig, "attention": AttentionConfig,
                  "train": TrainConfig, "decode": DecodeConfig}


def _yaml_key(name: str) -> str:
    return name.rstrip("_")


def section_keys(section: str) -> dict[str, dataclasses.Field]:
    return {_yaml_key(f.name): f for f in dataclasses.fields(_SECTION_TYPES[section])}


def all_keys() -> list[str]:
    """Every dotted key a trial config accepts."""
    return [f"{s}.{k}" for s in _SECTION_TYPES for k in section_keys(s)]


def flatten(nested: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in nested.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def set_dotted(nested: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = nested
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(dotted, f"'{part}' is a value, not a section")
    node[leaf] = value


def scalar(text: str, error: ErrorType = ConfigError) -> Any:
    """A YAML scalar as a user means it: PyYAML follows YAML 1.1, where `1e-05` (no dot) is a string."""
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    return parse_yaml(text, "--set", error) if text.strip() else ""


def parse_overrides(pairs: list[str], source: str = "--set") -> list[tuple[str, Any]]:
    """`KEY=VALUE` strings from the command line; values are parsed as YAML scalars (1e-3, true, none)."""
    parsed = []
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(pair or "''", "expected KEY=VALUE with a dotted key", source)
        key = key.strip()
        parsed.append((key, scalar(raw, lambda _key, message, _source: ConfigError(key, message, source))))
    return parsed


def _coerce(key: str, value: Any, typ: Any, source: str) -> Any:
    typ = {"str": str, "int": int, "float": float, "bool": bool}.get(typ, typ)
    if typ is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(key, f"expected true or false, got {shown(value)}", source)
    if typ is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigError(key, f"expected an integer, got {shown(value)}", source)
    if typ is float:
        if isinstance(value, str):  # PyYAML reads 1e-3 (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return finite(value, key, source)
        raise ConfigError(key, f"expected a number, got {shown(value)}", source)
    if value is None and key in CHOICES:  # YAML reads a bare `none` as null
        value = "none"
    if not isinstance(value, str):
        raise ConfigError(key, f"expected a string, got {shown(value)}", source)
    return value


def finite(value: int | float, key: str, source: str) -> float:
    """A number as a float, refused if it is NaN or infinite (or an integer too large for a float)."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ConfigError(key, f"must be a finite number (got {shown(value)})", source)
    return number


# sizes that allocate memory: a config, or a checkpoint's, beyond these is refused before anything is built
UPPER_BOUNDS: dict[str, int] = {
    "model.emb_size": 8192, "model.hidden_size": 8192, "model.encoder_layers": 16, "model.decoder_layers": 16,
    "data.src_vocab": 1_000_000, "data.tgt_vocab": 1_000_000, "data.subword_vocab": 1_000_000, "data.max_len": 1000,
    "train.batch_size": 10_000, "train.token_budget": 10_000_000, "decode.beam_size": 100, "decode.dev_beam_size": 100,
    "decode.max_src_len": 1000, "decode.max_len_ratio": 10, "decode.max_len_offset": 1000,
}


def _check_ranges(cfg: TrialConfig, source: str) -> None:
    def require(ok: bool, key: str, allowed: str, value: Any) -> None:
        if not ok:
            raise ConfigError(key, f"must be {allowed} (got {shown(value)})", source)

    for key, allowed in CHOICES.items():
        section, name = key.split(".")
        value = getattr(getattr(cfg, section), section_keys(section)[name].name)
        require(value in allowed, key, "one of " + ", ".join(allowed), value)
    a, m, t, d = cfg.attention, cfg.model, cfg.train, cfg.decode
    require(a.lambda_ > 1, "attention.lambda", "> 1 (tau_t lies in (1/lambda, lambda))", a.lambda_)
    require(a.tau > 0, "attention.tau", "> 0", a.tau)
    require(a.coverage_weight >= 0, "attention.coverage_weight", ">= 0", a.coverage_weight)
    require(not a.coverage or a.score == "concat", "attention.coverage",
            "false unless attention.score is concat (Tu et al. feed coverage inside the additive score's tanh)",
            a.coverage)
    require(not (a.coverage_weight > 0 and not a.coverage), "attention.coverage_weight",
            "0 unless attention.coverage is true", a.coverage_weight)
    require(not a.fertility or a.coverage, "attention.fertility",
            "false unless attention.coverage is true (fertility is what coverage is drawn towards)", a.fertility)
    require(a.placement == "luong" or not a.sentinel, "attention.sentinel",
            f"false with attention.placement {a.placement} (Li & Zhu's sentinel mixes in the state after the RNN step, "
            "t_i, which that placement attends before)", a.sentinel)
    require(a.placement != "cgru" or m.decoder_layers == 1, "model.decoder_layers",
            "1 with attention.placement cgru (its two transitions are the decoder's layers)", m.decoder_layers)
    require(t.guided_alignment >= 0, "train.guided_alignment", ">= 0 (0 = off)", t.guided_alignment)
    require(t.symmetry_weight >= 0, "train.symmetry_weight", ">= 0 (0 = off)", t.symmetry_weight)
    gold = cfg.data.corpus in GOLD_ALIGNED and cfg.data.tokenizer == "space"
    require(t.guided_alignment == 0 or gold or importlib.util.find_spec("eflomal") is not None,
            "train.guided_alignment", f"0 here (corpus {shown(cfg.data.corpus)} with tokenizer {cfg.data.tokenizer!r} "
            f"has no gold word alignments and eflomal, which would compute them, is not installed: {INSTALL_EFLOMAL})",
            t.guided_alignment)
    require(0 <= m.dropout < 1, "model.dropout", "in [0, 1)", m.dropout)
    for key in ("emb_size", "hidden_size", "encoder_layers", "decoder_layers"):
        require(getattr(m, key) >= 1, f"model.{key}", ">= 1", getattr(m, key))
    require(m.hidden_size % 2 == 0, "model.hidden_size",
            "even (each encoder direction has hidden_size / 2 units)", m.hidden_size)
    require(a.score != "key_value" or not a.sentinel, "attention.sentinel",
            "false with attention.score key_value (its context has hidden_size / 2 units; Li & Zhu mix the sentinel, "
            "of hidden_size units, into it)", a.sentinel)
    require(a.score != "key_value" or m.readout != "sum", "model.readout",
            "luong or auto with attention.score key_value (c + s needs a context of hidden_size units)", m.readout)
    require(a.score != "key_value" or m.hidden_size % 4 == 0, "model.hidden_size",
            "a multiple of 4 with attention.score key_value (each direction splits into key and value)", m.hidden_size)
    require(not m.tie_embeddings or m.emb_size == m.hidden_size, "model.tie_embeddings",
            "false unless model.emb_size == model.hidden_size", m.tie_embeddings)
    require(t.lr > 0, "train.lr", "> 0", t.lr)
    require(t.batch_size >= 1, "train.batch_size", ">= 1", t.batch_size)
    require(t.token_budget >= 0, "train.token_budget", ">= 0 (0 = off)", t.token_budget)
    require(t.clip_norm > 0, "train.clip_norm", "> 0", t.clip_norm)
    require(t.epochs >= 1, "train.epochs", ">= 1", t.epochs)
    require(0 <= t.label_smoothing < 1, "train.label_smoothing", "in [0, 1)", t.label_smoothing)
    require(0 < t.lr_decay <= 1, "train.lr_decay", "in (0, 1]", t.lr_decay)
    require(t.early_stopping >= 0, "train.early_stopping", ">= 0 (0 = off)", t.early_stopping)
    require(t.max_steps_per_epoch >= 0, "train.max_steps_per_epoch", ">= 0 (0 = all)", t.max_steps_per_epoch)
    require(d.beam_size >= 1, "decode.beam_size", ">= 1", d.beam_size)
    require(d.dev_beam_size >= 1, "decode.dev_beam_size", ">= 1", d.dev_beam_size)
    require(d.max_len_ratio > 0, "decode.max_len_ratio", "> 0", d.max_len_ratio)
    dc = cfg.data
    require(dc.max_len >= 1, "data.max_len", ">= 1", dc.max_len)
    require(dc.subword_vocab >= 8, "data.subword_vocab", ">= 8", dc.subword_vocab)
    require(dc.src_vocab >= 1, "data.src_vocab", ">= 1", dc.src_vocab)
    require(dc.tgt_vocab >= 1, "data.tgt_vocab", ">= 1", dc.tgt_vocab)
    require(dc.train_subset >= 0, "data.train_subset", ">= 0 (0 = all)", dc.train_subset)
    require(dc.eval_subset >= 0, "data.eval_subset", ">= 0 (0 = all)", dc.eval_subset)
    require(d.max_src_len >= 1, "decode.max_src_len", ">= 1", d.max_src_len)
    flat = cfg.flat()
    for key, limit in UPPER_BOUNDS.items():
        require(flat[key] <= limit, key, f"<= {limit:,} (what it allocates grows with it)", flat[key])


def build_config(raw: Mapping[str, Any] | None, overrides: list[tuple[str, Any]] = (),
                 source: str = "<config>") -> TrialConfig:
    """Validate a nested dict (plus dotted overrides) into a TrialConfig, or raise ConfigError."""
    nested = copy.deepcopy(dict(raw or {}))
    for key, value in overrides:
        set_dotted(nested, key, value)
    sections = {}
    for section, values in nested.items():
        if section not in _SECTION_TYPES:
            raise ConfigError(str(section), "unknown section; allowed: " + ", ".join(_SECTION_TYPES), source)
        if not isinstance(values, Mapping):
            raise ConfigError(section, "expected a mapping of options", source)
        fields = section_keys(section)
        kwargs = {}
        for key, value in values.items():
            dotted = f"{section}.{key}"
            if key not in fields:
                raise ConfigError(dotted, "unknown key; allowed: " + ", ".join(fields), source)
            kwargs[fields[key].name] = _coerce(dotted, value, fields[key].type, source)
        sections[section] = _SECTION_TYPES[section](**kwargs)
    cfg = TrialConfig(**sections)
    _check_ranges(cfg, source)
    return cfg


def load_config(path: str, overrides: list[tuple[str, Any]] = ()) -> TrialConfig:
    """Read a trial config YAML file; errors name the file."""
    raw = load_yaml_file(path, ConfigError) or {}
    if not isinstance(raw, Mapping):
        raise ConfigError("(file)", "expected a mapping with sections " + ", ".join(_SECTION_TYPES), path)
    return build_config(raw, overrides, source=path)
