"""What names a corpus: `synthetic`, a registry corpus, or a folder of plain-text files, and the one-line error of
a name that is none of them. Apart from nmt_core/data/corpora.py, which prepares and reads corpora (zip archives,
SQLite, pip, hashes, parquet), so that `sweeper validate` and `--help` check a corpus name without loading any of that;
corpora.py re-exports these names for its importers.
"""

from __future__ import annotations

from pathlib import Path

from nmt_core.gates.yaml_input import shown

MAX_NAME_PART, MAX_PATH = 255, 4096  # the longest file name and path Linux takes (NAME_MAX, PATH_MAX)
REGISTRY = [
    "tatoeba-en-es",
    "bible-en-vi",
    "bible-en-de",
    "bible-en-fr",
    "bible-en-es",
    "bible-grc-en",
    "iwslt15-en-vi",
]


class CorpusError(ValueError):
    """A corpus that cannot be used; the message names the file or package and what is wrong."""


def check_name(name: str) -> None:
    """Refuse a bare name that is neither synthetic, a registry corpus nor a folder here; `sweeper validate`
    calls this too. A path (`data/x`, `./x`) is left to whoever reads it: it may exist only on a cluster."""
    if name in ("synthetic", *REGISTRY) or is_folder(name) or "/" in name or name.startswith("."):
        return
    raise unknown_corpus(name)


def is_folder(name: str) -> bool:
    """Whether a corpus name is a folder here; a name no path can be (or one the system will not look at) is
    one CorpusError rather than an OSError."""
    if len(name) > MAX_PATH or any(len(part) > MAX_NAME_PART for part in name.split("/")):
        raise CorpusError(
            f"data.corpus: longer than a path can be ({MAX_NAME_PART} characters a part, "
            f"{MAX_PATH} in all; got {shown(name)})"
        )
    try:
        return Path(name).expanduser().is_dir()
    except OSError as err:
        raise CorpusError(f"data.corpus: cannot look at {shown(name)} ({err.strerror})") from None


def unknown_corpus(name: str) -> CorpusError:
    return CorpusError(
        f"data.corpus: unknown corpus {shown(name)}; allowed: synthetic, {', '.join(REGISTRY)}, "
        "or a folder with train/dev/test files"
    )
