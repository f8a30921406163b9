"""Words and punctuation from text, and back: the tokenisers a trial's data and the summary's word classes share.
Torch-free and apart from batching (nmt_core.data.batches), so that the summary reads tokens without importing
torch."""

from __future__ import annotations

import re

from nmt_core.config import DataConfig

_WORD = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")
JOINER = "￭"  # marks a side of a punctuation token that had no space (OpenNMT's joiner): detokenising is exact


def word_tokens(text: str) -> list[str]:
    """Words and punctuation, without joiners: the tokens multi-bleu-style BLEU counts."""
    return _WORD.findall(text)


def joined_word_tokens(text: str) -> list[str]:
    """`word` tokenisation that can be undone: punctuation attached to its neighbour carries JOINER on that side.

    "¿Dónde está?" -> ["¿￭", "Dónde", "está", "￭?"]; words themselves never carry a joiner unless two
    words touch without punctuation between them (rare), so a content word keeps one vocabulary entry.
    """
    tokens: list[str] = []
    previous_end, previous_is_word = -1, True
    for match in _WORD.finditer(text.replace(JOINER, "")):
        token, is_word = match.group(), match.group()[0].isalnum() or match.group()[0] == "_"
        if match.start() == previous_end:
            if not is_word or previous_is_word:
                token = JOINER + token
            else:
                tokens[-1] += JOINER
        tokens.append(token)
        previous_end, previous_is_word = match.end(), is_word
    return tokens


def detokenize_joined(tokens: list[str]) -> str:
    """The inverse of `joined_word_tokens` (up to runs of whitespace)."""
    out: list[str] = []
    glue_next = True
    for token in tokens:
        core = token.strip(JOINER) or token
        if out and not glue_next and not token.startswith(JOINER):
            out.append(" ")
        out.append(core)
        glue_next = token.endswith(JOINER) and len(token) > 1
    return "".join(out)


def surface(token: str) -> str:
    """A token as a reader sees it (traces, plots, tables): without its joiners."""
    return token.strip(JOINER) or token


def tokenize(text: str, cfg: DataConfig) -> list[str]:
    """`space`: the text is already tokenised (IWSLT); `word`: split punctuation off words, reversibly."""
    text = text.lower() if cfg.lowercase else text
    return text.split() if cfg.tokenizer == "space" else joined_word_tokens(text)
