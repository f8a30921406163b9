"""Typed trial configuration: one nested dict (data, model, attention, train, decode) validated once.

Every part of the project addresses options by dotted keys (`attention.lambda`), so validation errors
name the dotted key, the source file and what is allowed: users fix YAML, not Python tracebacks. What the attention
parts and the architectures allow, they declare themselves (nmt_core.registry, nmt_core.architectures): this module
reads it, and the model's modules import it only for its types.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib.util
import math
from collections.abc import Callable, ItemsView, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from nmt_core import registry
from nmt_core.architectures import ARCHITECTURES
from nmt_core.gate import clip_path, escape, one_line
from nmt_core.parts import MECHANISMS
from nmt_core.yaml_input import SHOWN_CHARS, ErrorType, load_yaml_file, parse_yaml, shown


class ConfigError(ValueError):
    """Bad user input; the message is one line naming the file, the dotted key and what is allowed.

    Values in the message go through `shown`; a key and the source are user input too and are cut here, and the
    whole line passes the gate's `one_line` (nmt_core/gate.py): no control character reaches a terminal."""

    def __init__(self, key: str, message: str, source: str = "<config>"):
        key = key if len(key) <= SHOWN_CHARS else f"{key[:SHOWN_CHARS]}..."
        self.key, self.source = escape(key), clip_path(source)
        super().__init__(one_line(f"{self.source}: {self.key}: {message}"))


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
    readout: str = "auto"  # luong: tanh(W_c [c; s]) (Luong eq. 5); sum: c + s (Li & Zhu eq. 12); auto: sum iff sentinel
    tie_embeddings: bool = False
    fast_path: bool = True  # the same maths in fewer, larger ops (decoder steps, loss on real tokens); false: plain
    arch: str = "rnn"  # rnn: the recurrent encoder-decoder; transformer: Vaswani et al. 2017
    layers: int = 6  # transformer: layers of the encoder and of the decoder
    heads: int = 8  # transformer: attention heads (each has hidden_size / heads units)
    ff_size: int = 2048  # transformer: inner size of the feed-forward blocks
    norm: str = "pre"  # transformer: pre: x + f(LN(x)) (no warm-up tuning); post: LN(x + f(x)) (Vaswani)
    compile: str = "none"  # torch.compile the step: default, reduce-overhead; graphs: CUDA graphs (H100: 5.5-7.8x)


@dataclass
class AttentionConfig:
    score: str = "general"  # the transformer reads scaled_dot where this is general (its own: Vaswani et al.)
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
    sact_reading: str = "first_pass"  # transformer SACT: query: beta from the query alone; first_pass: + W_c c0_{t-1}
    temperature_at: str = "cross"  # transformer: the decoder's cross-attention, its self-attention, or both
    position_layers: int = 0  # transformer gaussian bias: in the lowest N layers only (0 = all)


@dataclass
class TrainConfig:
    lr: float = 3.0e-4
    batch_size: int = 64
    token_budget: int = 0  # > 0: batches hold at most this many source+target tokens (with padding)
    buckets: int = 0  # > 0: length buckets over data.max_len, a batch padded to its bucket; 0: sorted pools (as before)
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
    schedule: str = "constant"  # inverse_sqrt: lr * min(step / warmup, sqrt(warmup / step)) (Vaswani et al. 2017)
    warmup: int = 4000  # inverse_sqrt: updates until the rate peaks at train.lr


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
        return {
            f.name: {_yaml_key(k): v for k, v in dataclasses.asdict(getattr(self, f.name)).items()}
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


class Choices(Mapping[str, tuple[str, ...]]):
    """The allowed values of each string key: fixed ones, and the attention.* parts' from nmt_core.registry, read
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


CHOICES = Choices(
    {
        "data.tokenizer": ("word", "space", "sentencepiece"),
        "model.cell": ("lstm", "gru"),
        "model.readout": ("auto", "luong", "sum"),
        "model.compile": ("none", "default", "reduce-overhead", "graphs"),
        "train.device": ("auto", "cpu", "cuda"),
        "model.arch": tuple(ARCHITECTURES),
        "model.norm": ("pre", "post"),
        "attention.temperature_at": ("cross", "self", "both"),
        "train.schedule": ("constant", "inverse_sqrt"),
        "decode.bleu_tokenize": ("13a", "none", "intl", "char"),
    }
)


def _number(value: float) -> str:
    """1000000 rather than 1e+06, 0.5 as 0.5: a bound as a user would write it in YAML."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class Bound:
    """A numeric key's allowed interval: build_config checks it and the JSON Schema (sweeper/schema.py) states it."""

    low: float
    high: float | None = None
    open_low: bool = False  # low itself is not allowed
    open_high: bool = False
    note: str = ""  # why, or what the edge value means

    def holds(self, value: float) -> bool:
        above = value > self.low if self.open_low else value >= self.low
        below = self.high is None or (value < self.high if self.open_high else value <= self.high)
        return above and below

    def __str__(self) -> str:
        low, high = _number(self.low), None if self.high is None else _number(self.high)
        if high is None:
            text = f"{'>' if self.open_low else '>='} {low}"
        else:
            text = f"in {'(' if self.open_low else '['}{low}, {high}{')' if self.open_high else ']'}"
        return text + (f" ({self.note})" if self.note else "")


OFF, ALL = "0 = off", "0 = all"
GROWS = "what it allocates grows with it"  # upper bounds: a config, or a checkpoint's, beyond them is refused
BOUNDS: dict[str, Bound] = {
    "attention.lambda": Bound(1, open_low=True, note="tau_t lies in (1/lambda, lambda)"),
    "attention.tau": Bound(0, open_low=True),
    "attention.coverage_weight": Bound(0),
    "train.guided_alignment": Bound(0, note=OFF),
    "train.symmetry_weight": Bound(0, note=OFF),
    "model.dropout": Bound(0, 1, open_high=True),
    **{f"model.{key}": Bound(1, 8192, note=GROWS) for key in ("emb_size", "hidden_size")},
    **{f"model.{key}": Bound(1, 16, note=GROWS) for key in ("encoder_layers", "decoder_layers")},
    "train.lr": Bound(0, open_low=True),
    "train.batch_size": Bound(1, 10_000, note=GROWS),
    "train.token_budget": Bound(0, 10_000_000, note=f"{OFF}; {GROWS}"),
    "train.buckets": Bound(0, 1000, note=f"{OFF}: batches sorted by length in pools, each padded to its longest"),
    "train.clip_norm": Bound(0, open_low=True),
    "train.epochs": Bound(1),
    "train.label_smoothing": Bound(0, 1, open_high=True),
    "train.lr_decay": Bound(0, 1, open_low=True),
    "train.early_stopping": Bound(0, note=OFF),
    "train.max_steps_per_epoch": Bound(0, note=ALL),
    "decode.beam_size": Bound(1, 100, note=GROWS),
    "decode.dev_beam_size": Bound(1, 100, note=GROWS),
    "decode.max_len_ratio": Bound(0, 10, open_low=True, note=GROWS),
    "decode.max_len_offset": Bound(-1000, 1000, note=GROWS),
    "decode.max_src_len": Bound(1, 1000, note=GROWS),
    "data.max_len": Bound(1, 1000, note=GROWS),
    "data.subword_vocab": Bound(8, 1_000_000, note=GROWS),
    "data.src_vocab": Bound(1, 1_000_000, note=GROWS),
    "data.tgt_vocab": Bound(1, 1_000_000, note=GROWS),
    "data.train_subset": Bound(0, note=ALL),
    "data.eval_subset": Bound(0, note=ALL),
    "model.layers": Bound(1, 64, note=GROWS),
    "model.heads": Bound(1, 256, note=GROWS),
    "model.ff_size": Bound(1, 65536, note=GROWS),
    "attention.position_layers": Bound(0, 64, note=ALL),
    "train.warmup": Bound(1, 10_000_000),
}

GOLD_ALIGNED = ("bible-grc-en",)  # corpora that ship manual word alignments (they index `space` tokens)
INSTALL_EFLOMAL = "pip install 'nmt-sweeper[align]' (or: pip install eflomal)"

_SECTION_TYPES = {
    "data": DataConfig,
    "model": ModelConfig,
    "attention": AttentionConfig,
    "train": TrainConfig,
    "decode": DecodeConfig,
}


def _yaml_key(name: str) -> str:
    return name.rstrip("_")


@functools.cache
def section_keys(section: str) -> dict[str, dataclasses.Field]:
    """A section's keys as YAML writes them and their dataclass fields (types, defaults): derived once, read by every
    build_config (a sweep's driver builds thousands, the summary one per trial). Read it; do not change it."""
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


def _value(cfg: TrialConfig, key: str) -> Any:
    section, name = key.split(".")
    return getattr(getattr(cfg, section), section_keys(section)[name].name)


def finite(value: int | float, key: str, source: str) -> float:
    """A number as a float, refused if it is NaN or infinite (or an integer too large for a float)."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ConfigError(key, f"must be a finite number (got {shown(value)})", source)
    return number


def _check_ranges(cfg: TrialConfig, source: str) -> None:
    def require(ok: bool, key: str, allowed: str, value: Any) -> None:
        if not ok:
            raise ConfigError(key, f"must be {allowed} (got {shown(value)})", source)

    for key, allowed in CHOICES.items():
        require(_value(cfg, key) in allowed, key, "one of " + ", ".join(allowed), _value(cfg, key))
    _read_as_architecture(cfg)
    for key, bound in BOUNDS.items():
        require(bound.holds(_value(cfg, key)), key, str(bound), _value(cfg, key))
    _check_arch(cfg, require)
    a, m, t = cfg.attention, cfg.model, cfg.train
    require(
        m.arch != "rnn" or m.hidden_size % 2 == 0,
        "model.hidden_size",
        "even (each encoder direction has hidden_size / 2 units)",
        m.hidden_size,
    )
    for rule in registry.rules_of(cfg):  # what each selected attention part asks of the rest (nmt_core.attention)
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
