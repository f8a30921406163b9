"""Typed trial configuration: one nested dict (data, model, attention, train, decode) validated once.

Every part of the project addresses options by dotted keys (`attention.lambda`), so validation errors
name the dotted key, the source file and what is allowed: users fix YAML, not Python tracebacks. What the attention
parts and the architectures allow, they declare themselves (nmt_core.family.registry, nmt_core.family.architectures):
this module reads it, and the model's modules import it only for its types.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib.util
from collections.abc import Callable, ItemsView, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from nmt_core.family import registry
from nmt_core.family.architectures import ARCHITECTURES
from nmt_core.family.parts import MECHANISMS
from nmt_core.gates.gate import ConfigError
from nmt_core.gates.settings import Bound, Setting, accept, declared, setting, yaml_key
from nmt_core.gates.yaml_input import ErrorType, load_yaml_file, parse_yaml, shown

OFF, ALL = "0 = off", "0 = all"
GROWS = "what it allocates grows with it"  # upper bounds: a config, or a checkpoint's, beyond them is refused
EPOCHS = 10_000  # epochs (and patience in epochs): papers train 10-100; a run logs, checkpoints and evaluates each
MAX_SEED = 2**31 - 1  # NumPy takes seeds below 2**32, torch below 2**64: a 31-bit seed leaves room for + repeats
SEEDS = "a 31-bit seed; seeds plus a sweep's repeats stay below NumPy's 2**32"


def _size(low: int, high: int, note: str = "") -> Bound:
    """A number a run allocates or loops over: its upper bound is one no study reaches, so that a typo (an extra
    digit or three) is one line before anything is allocated, not an out-of-memory hours later."""
    return Bound(low, high, note=f"{note}; {GROWS}" if note else GROWS)


@dataclass
class DataConfig:
    corpus: str = setting("synthetic", "a corpus name (docs/sweeps.md#corpora) or a folder of parallel text")
    src: str = setting("src", "the source side's file suffix or language")
    tgt: str = setting("tgt", "the target side's file suffix or language")
    tokenizer: str = setting(
        "word",
        "word: split punctuation off words; space: already tokenised; sentencepiece: subwords",
        choices=("word", "space", "sentencepiece"),
    )
    subword_vocab: int = setting(
        8000, "sentencepiece: pieces per side (a unigram model trained on the training split)", _size(8, 1_000_000)
    )
    lowercase: bool = setting(False, "lowercase both sides before building vocabularies")
    max_len: int = setting(50, "training pairs longer than this (tokens, either side) are dropped", _size(1, 1000))
    src_vocab: int = setting(17700, "source words kept (by frequency)", _size(1, 1_000_000))
    tgt_vocab: int = setting(7000, "target words kept (by frequency)", _size(1, 1_000_000))
    min_freq: int = setting(1, "words seen fewer times are unknown words")
    train_subset: int = setting(
        0, "keep only the first N training pairs (0 = all): quick sweeps on a real corpus", Bound(0, note=ALL)
    )
    eval_subset: int = setting(0, "keep only the first N dev/test pairs (0 = all)", Bound(0, note=ALL))
    cache_dir: str = setting("", "where prepared corpora live; empty: $NMT_DATA_DIR or ~/.cache/nmt_sweeper")


@dataclass
class ModelConfig:
    cell: str = setting("lstm", "the RNN's cell", choices=("lstm", "gru"))
    emb_size: int = setting(512, "embedding size", _size(1, 8192))
    hidden_size: int = setting(512, "hidden size (the transformer's d_model)", _size(1, 8192))
    encoder_layers: int = setting(1, "rnn: encoder layers", _size(1, 16))
    decoder_layers: int = setting(1, "rnn: decoder layers", _size(1, 16))
    dropout: float = setting(0.4, "dropout probability", Bound(0, 1, open_high=True))
    input_feeding: bool = setting(True, "rnn: the previous attentional state feeds the next step (Luong)")
    encoder_merge: str = setting(
        "concat",
        "rnn: the encoder's two directions concatenated (H/2 units each) or summed (H each; SACT's code)",
        choices=("concat", "sum"),
    )
    readout: str = setting(
        "auto",
        "luong: tanh(W_c [c; s]) (Luong eq. 5); sum: c + s (Li & Zhu eq. 12); auto: sum iff sentinel",
        choices=("auto", "luong", "sum"),
    )
    tie_embeddings: bool = setting(False, "the output layer shares the target embeddings")
    fast_path: bool = setting(
        True, "the same maths in fewer, larger ops (decoder steps, loss on real tokens); false: plain"
    )
    arch: str = setting(
        "rnn", "rnn: the recurrent encoder-decoder; transformer: Vaswani et al. 2017", choices=tuple(ARCHITECTURES)
    )
    layers: int = setting(6, "transformer: layers of the encoder and of the decoder", _size(1, 64))
    heads: int = setting(8, "transformer: attention heads (each has hidden_size / heads units)", _size(1, 256))
    ff_size: int = setting(2048, "transformer: inner size of the feed-forward blocks", _size(1, 65536))
    norm: str = setting(
        "pre",
        "transformer: pre: x + f(LN(x)) (no warm-up tuning); post: LN(x + f(x)) (Vaswani)",
        choices=("pre", "post"),
    )
    compile: str = setting(
        "none",
        "torch.compile the step: default, reduce-overhead; graphs: CUDA graphs (H100: 5.5-7.8x)",
        choices=("none", "default", "reduce-overhead", "graphs"),
    )


@dataclass
class AttentionConfig:
    # score, temperature, position_bias, self_attention, sact_reading, normaliser: the attention parts' names
    # (nmt_core.family.registry)
    score: str = setting("general", "the transformer reads scaled_dot where this is general (Vaswani et al.)")
    temperature: str = setting("none", "none, fixed (tau), learned or sact (lambda)")
    tau: float = setting(1.0, "a fixed temperature: scores divided by tau", Bound(0, open_low=True))
    lambda_: float = setting(
        4.0, "SACT: the temperature's range", Bound(1, open_low=True, note="tau_t lies in (1/lambda, lambda)")
    )
    sact_bias: bool = setting(False, "SACT eq. 2 has none; a bias lets SACT learn one global temperature")
    sact_base: bool = setting(
        False, "SACT and its learned control: tau = tau_0 lambda^beta, tau_0 learned per head (log tau_0 from 0)"
    )
    train_keys: int = setting(
        20,
        "SSMax: n_train, where the fixed log-n scaling is 1 (log n / log n_train) and the learned s starts",
        Bound(2, 100_000, note="log n_train > 0; IWSLT'15 En-Vi's sources average ~20 words"),
    )
    sentinel: bool = setting(False, "a learned slot attention may attend to instead of a source word")
    coverage: bool = setting(False, "a coverage vector feeds the scores (Tu et al. 2016)")
    coverage_weight: float = setting(0.0, "weight of the coverage penalty (with attention.coverage)", Bound(0))
    fertility: bool = setting(False, "coverage towards f_j = N sigmoid(W_j h_j) instead of 1 (lecture 003)")
    placement: str = setting(
        "luong", "luong: attend from s_t; bahdanau: from s_{t-1}, context into the RNN; cgru: dl4mt"
    )
    position_bias: str = setting(
        "none", "log: Cohn et al. 2016 log(1 + i) features; gaussian: a learned window (slides 001)"
    )
    intra_temporal: bool = setting(False, "Paulus et al. 2017: scores divided by their past exponentiated scores")
    self_attention: str = setting("none", "encoder, decoder or both (course report 004)")
    sact_reading: str = setting(
        "first_pass", "transformer SACT: query: beta from the query alone; first_pass: + W_c c0_{t-1}"
    )
    temperature_at: str = setting(
        "cross",
        "transformer: the decoder's cross-attention, its self-attention, or both",
        choices=("cross", "self", "both"),
    )
    position_layers: int = setting(
        0, "transformer gaussian bias: in the lowest N layers only (0 = all)", Bound(0, 64, note=ALL)
    )
    qk_norm: bool = setting(
        False, "transformer: unit queries and keys where the temperature acts, cosine / tau (Henry et al. 2020)"
    )
    normaliser: str = setting("softmax", "softmax, entmax (alpha) or entmax_learned (alpha per head, from alpha)")
    alpha: float = setting(
        1.5, "alpha-entmax: 1 is softmax, 2 sparsemax", Bound(1, 2, open_low=True, note="alpha -> 1 is softmax")
    )
    softcap: bool = setting(False, "Gemma 2's logit soft-capping z <- cap tanh(z / cap)")
    cap: float = setting(50.0, "soft-capping's c (Gemma 2: 50)", Bound(0, open_low=True))
    entropy_sharpening: bool = setting(
        False, "decoding only: sharpen a head's row whose attention entropy exceeds the threshold (Velickovic 2024)"
    )
    entropy_threshold: float = setting(
        0.5, "entropy sharpening: rows above this entropy (nats) are sharpened (Velickovic et al.: 0.5)", Bound(0)
    )


# what train.early_stopping_metric may name: scored on dev every epoch (TER's sentence statistics are too slow for that)
EARLY_STOPPING_METRICS = ("bleu_dev", "chrf_dev")


@dataclass
class TrainConfig:
    lr: float = setting(3.0e-4, "learning rate (Adam)", Bound(0, open_low=True))
    batch_size: int = setting(64, "sentence pairs a batch", _size(1, 10_000))
    token_budget: int = setting(
        0, "> 0: batches hold at most this many source+target tokens (with padding)", _size(0, 10_000_000, OFF)
    )
    buckets: int = setting(
        0,
        "> 0: length buckets over data.max_len, a batch padded to its bucket; 0: sorted pools",
        Bound(0, 1000, note=f"{OFF}: batches sorted by length in pools, each padded to its longest"),
    )
    clip_norm: float = setting(10.0, "gradients clipped to this norm", Bound(0, open_low=True))
    epochs: int = setting(12, "passes over the training data", _size(1, EPOCHS))
    seed: int = setting(1, "seeds Python and torch (a sweep's repeats add 1, 2, ...)", Bound(0, MAX_SEED, note=SEEDS))
    label_smoothing: float = setting(0.0, "label smoothing of the loss", Bound(0, 1, open_high=True))
    lr_decay: float = setting(1.0, "< 1: multiply lr by this when dev BLEU stops improving", Bound(0, 1, open_low=True))
    lr_patience: int = setting(1, "epochs without a better dev BLEU before lr decays", Bound(0, EPOCHS))
    early_stopping: int = setting(
        0, "> 0: stop after this many epochs without a better dev BLEU", Bound(0, EPOCHS, note=OFF)
    )
    early_stopping_metric: str = setting(
        "bleu_dev",
        "the dev score that picks the best epoch (whose weights are tested), early stopping and lr decay",
        choices=EARLY_STOPPING_METRICS,
    )
    max_steps_per_epoch: int = setting(
        0, "> 0: cap updates per epoch (smoke runs, benchmarks)", Bound(0, 1_000_000_000, note=ALL)
    )
    device: str = setting("auto", "where to train", choices=("auto", "cpu", "cuda"))
    amp: bool = setting(False, "bf16 autocast (CUDA; a CPU with AVX-512 BF16 or AMX)")
    guided_alignment: float = setting(
        0.0, "weight of H(A, alpha) against word alignments (gold, else eflomal's)", Bound(0, note=OFF)
    )
    symmetry_weight: float = setting(
        0.0, "> 0: train t->s jointly, with this weight on the trace bonus (Cohn et al. 2016)", Bound(0, note=OFF)
    )
    schedule: str = setting(
        "constant",
        "inverse_sqrt: lr * min(step / warmup, sqrt(warmup / step)) (Vaswani et al. 2017)",
        choices=("constant", "inverse_sqrt"),
    )
    warmup: int = setting(4000, "inverse_sqrt: updates until the rate peaks at train.lr", Bound(1, 10_000_000))


@dataclass
class DecodeConfig:
    beam_size: int = setting(10, "beam width for test BLEU and translation", _size(1, 100))
    dev_beam_size: int = setting(1, "dev BLEU every epoch: greedy by default, it is the cheap signal", _size(1, 100))
    length_penalty: float = setting(1.0, "score / length**alpha")
    max_len_ratio: float = setting(
        2.0, "a translation stops at ratio x source length + offset", Bound(0, 10, open_low=True, note=GROWS)
    )
    max_len_offset: int = setting(10, "see decode.max_len_ratio", Bound(-1000, 1000, note=GROWS))
    max_src_len: int = setting(
        256, "translation, dev/test sets: longer sentences are cut to this many tokens (with a warning)", _size(1, 1000)
    )
    bleu_tokenize: str = setting("13a", "sacrebleu's tokenizer", choices=("13a", "none", "intl", "char"))
    bleu_lowercase: bool = setting(False, "case-insensitive BLEU")


@dataclass
class TrialConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    attention: AttentionConfig = field(default_factory=AttentionConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {
            f.name: {yaml_key(k): v for k, v in dataclasses.asdict(getattr(self, f.name)).items()}
            for f in dataclasses.fields(self)
        }

    def flat(self) -> dict[str, Any]:
        return flatten(self.to_dict())

    def active(self) -> dict[str, Any]:
        """The flat config without the settings this variant ignores (`attention.lambda` without SACT, ...):
        MLflow's parameter views then compare what acted."""
        flat, owned, used = self.flat(), registry.settings(), registry.settings(self.attention)
        return {
            k: v
            for k, v in flat.items()
            if (k not in owned or k in used) and (k not in INACTIVE_UNLESS or INACTIVE_UNLESS[k](flat))
        }


# a setting that acts only when its predicate on the flat config holds (the attention parts' own: their `settings`)
INACTIVE_UNLESS: dict[str, Any] = {
    "data.subword_vocab": lambda c: c["data.tokenizer"] == "sentencepiece",
    "train.lr_patience": lambda c: c["train.lr_decay"] < 1,
    "decode.length_penalty": lambda c: c["decode.beam_size"] > 1,
    "train.warmup": lambda c: c["train.schedule"] == "inverse_sqrt",
}

# keys that only one architecture reads (each declares its own): the other refuses them unless left at their defaults
RNN_ONLY, TRANSFORMER_ONLY = ARCHITECTURES["rnn"].own_keys, ARCHITECTURES["transformer"].own_keys


def _only_with(arch: str, key: str) -> Any:
    """The predicate of a key one architecture reads: that architecture, and the key's own predicate if it has one."""
    own = INACTIVE_UNLESS.get(key, lambda c: True)
    return lambda c: c["model.arch"] == arch and own(c)


INACTIVE_UNLESS.update(
    {key: _only_with(arch, key) for arch, architecture in ARCHITECTURES.items() for key in architecture.own_keys}
)


_SECTION_TYPES = {
    "data": DataConfig,
    "model": ModelConfig,
    "attention": AttentionConfig,
    "train": TrainConfig,
    "decode": DecodeConfig,
}


class Choices(Mapping[str, tuple[str, ...]]):
    """The allowed values of each string key: fixed ones, and the attention.* parts' from nmt_core.family.registry, read
    when asked (a part registered after this import, a test's or a user's own, is allowed like the built-ins)."""

    def __init__(self, fixed: dict[str, tuple[str, ...]]):
        self.fixed = fixed

    def _all(self) -> dict[str, tuple[str, ...]]:
        return {**self.fixed, **registry.choices()}

    def __getitem__(self, key: str) -> tuple[str, ...]:
        return self._all()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def items(self) -> ItemsView[str, tuple[str, ...]]:
        return self._all().items()  # one read of the registries, not one per key


# every trial setting by dotted key, as its section declares it (nmt_core.gates.settings)
SETTINGS: dict[str, Setting] = {f"{s}.{k}": d for s, cls in _SECTION_TYPES.items() for k, d in declared(cls).items()}
CHOICES = Choices({key: d.choices for key, d in SETTINGS.items() if d.choices})
BOUNDS: dict[str, Bound] = {key: d.bound for key, d in SETTINGS.items() if d.bound}  # --beam, checkpoints read them

GOLD_ALIGNED = ("bible-grc-en",)  # corpora that ship manual word alignments (they index `space` tokens)
INSTALL_EFLOMAL = "pip install 'nmt-sweeper[align]' (or: pip install eflomal)"


@functools.cache
def section_keys(section: str) -> dict[str, dataclasses.Field]:
    """A section's keys as YAML writes them and their dataclass fields (types, defaults): derived once, read by every
    build_config (a sweep's driver builds thousands, the summary one per trial). Read it; do not change it."""
    return {yaml_key(f.name): f for f in dataclasses.fields(_SECTION_TYPES[section])}


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
    if not text.strip():
        return ""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes the shell passed that are not UTF-8 (Python keeps them as surrogates)
        raise error("(value)", f"not UTF-8 text (got {shown(text)})", "--set") from None
    return parse_yaml(text, "--set", error)


def parse_overrides(pairs: list[str], source: str = "--set") -> list[tuple[str, Any]]:
    """`KEY=VALUE` strings from the command line; values are parsed as YAML scalars (1e-3, true, none)."""
    parsed = []
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(pair or "''", "expected KEY=VALUE with a dotted key", source)
        key = key.strip()
        if not key.isprintable():  # a key is written into the YAML that runs, and shown: no control character
            raise ConfigError(key, "a key holds a control character; keys are dotted names", source)
        parsed.append((key, scalar(raw, lambda _key, message, _source: ConfigError(key, message, source))))  # noqa: B023 (called at once)
    return parsed


def _value(cfg: TrialConfig, key: str) -> Any:
    section, name = key.split(".")
    return getattr(getattr(cfg, section), section_keys(section)[name].name)


def _check_ranges(cfg: TrialConfig, source: str) -> None:
    def require(ok: bool, key: str, allowed: str, value: Any) -> None:
        if not ok:
            raise ConfigError(key, f"must be {allowed} (got {shown(value)})", source)

    _read_as_architecture(cfg)
    _check_arch(cfg, require)
    a, m, t = cfg.attention, cfg.model, cfg.train
    require(
        m.arch != "rnn" or m.hidden_size % 2 == 0,
        "model.hidden_size",
        "even (each encoder direction has hidden_size / 2 units)",
        m.hidden_size,
    )
    for rule in registry.rules_of(
        cfg
    ):  # what each selected attention part asks of the rest (nmt_core.models.attention)
        if not rule.holds(cfg):
            require(False, rule.key, rule.message(cfg), _value(cfg, rule.key))
    require(
        not (a.coverage_weight > 0 and not a.coverage),
        "attention.coverage_weight",
        "0 unless attention.coverage is true",
        a.coverage_weight,
    )
    gold = cfg.data.corpus in GOLD_ALIGNED and cfg.data.tokenizer == "space"
    require(
        t.guided_alignment == 0 or gold or importlib.util.find_spec("eflomal") is not None,
        "train.guided_alignment",
        f"0 here (corpus {shown(cfg.data.corpus)} with tokenizer {cfg.data.tokenizer!r} "
        f"has no gold word alignments and eflomal, which would compute them, is not installed: {INSTALL_EFLOMAL})",
        t.guided_alignment,
    )
    require(
        m.compile != "graphs" or t.buckets > 0,
        "train.buckets",
        "> 0 with model.compile graphs (a CUDA graph replays one batch shape; length buckets make shapes repeat)",
        t.buckets,
    )
    require(
        not m.tie_embeddings or m.emb_size == m.hidden_size,
        "model.tie_embeddings",
        "false unless model.emb_size == model.hidden_size",
        m.tie_embeddings,
    )


def _default(key: str) -> Any:
    section, name = key.split(".")
    return section_keys(section)[name].default


def _read_as_architecture(cfg: TrialConfig) -> None:
    """Where the config keeps a key's default, the value model.arch reads in its place (the Transformer's score)."""
    for key, value in ARCHITECTURES[cfg.model.arch].own_defaults.items():
        if _value(cfg, key) == _default(key):
            section, name = key.split(".")
            setattr(getattr(cfg, section), section_keys(section)[name].name, value)


def _check_arch(cfg: TrialConfig, require: Callable[[bool, str, str, Any], None]) -> None:
    """What model.arch allows: the other architecture's keys at their defaults (a value there would be silently
    ignored), attention parts that have a meaning in it, and the Transformer's sizes."""
    m, t = cfg.model, cfg.train
    for other, architecture in ARCHITECTURES.items():
        for key in architecture.own_keys if other != m.arch else ():
            value = _value(cfg, key)
            require(
                value == _default(key),
                key,
                f"{_default(key)} (its default) with model.arch {m.arch}: only the {other} reads it",
                value,
            )
    _check_parts_serve(cfg, require)
    require(
        t.schedule == "constant" or t.lr_decay == 1,
        "train.lr_decay",
        "1 with train.schedule inverse_sqrt (the schedule sets the rate)",
        t.lr_decay,
    )
    if m.arch != "transformer":
        return
    require(
        m.hidden_size % m.heads == 0,
        "model.hidden_size",
        f"a multiple of model.heads ({m.heads}): each head gets hidden_size / heads units",
        m.hidden_size,
    )
    require(
        m.emb_size == m.hidden_size,
        "model.emb_size",
        f"model.hidden_size ({m.hidden_size}) with model.arch transformer (embeddings feed the residual stream)",
        m.emb_size,
    )


def _check_parts_serve(cfg: TrialConfig, require: Callable[[bool, str, str, Any], None]) -> None:
    """Every attention part the config selects has a meaning in model.arch (keys of another architecture, at their
    defaults, aside)."""
    arch = cfg.model.arch
    others = {key for name, a in ARCHITECTURES.items() if name != arch for key in a.own_keys}
    for name, part in registry.selected(cfg.attention):
        key = f"attention.{name}"
        if key in others or arch in part.architectures:
            continue
        allowed = "false" if name in MECHANISMS else "one of " + ", ".join(registry.serving(arch, name))
        require(False, key, f"{allowed} with model.arch {arch} (the others have no part there)", _value(cfg, key))


def build_config(
    raw: Mapping[str, Any] | None, overrides: list[tuple[str, Any]] = (), source: str = "<config>"
) -> TrialConfig:
    """Validate a nested dict (plus dotted overrides) into a TrialConfig, or raise ConfigError."""
    nested = copy.deepcopy(dict(raw or {}))
    for key, value in overrides:
        set_dotted(nested, key, value)
    sections, choices = {}, dict(CHOICES.items())
    for section, values in nested.items():
        if section not in _SECTION_TYPES:
            raise ConfigError(str(section), "unknown section; allowed: " + ", ".join(_SECTION_TYPES), source)
        if not isinstance(values, Mapping):
            raise ConfigError(section, "expected a mapping of options", source)
        fields, settings = section_keys(section), declared(_SECTION_TYPES[section])
        kwargs = {}
        for key, value in values.items():
            dotted = f"{section}.{key}"
            if key not in fields:
                raise ConfigError(dotted, "unknown key; allowed: " + ", ".join(fields), source)
            kwargs[fields[key].name] = accept(
                dotted, value, settings[key], source, ConfigError, choices.get(dotted, ())
            )
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
