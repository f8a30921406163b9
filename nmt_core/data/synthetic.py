"""A generated toy language pair (`corpus: synthetic`) so tests can train, decode and trace in seconds.

The target language has what the papers talk about: content words that translate one to one (sharp
attention), function words with no source counterpart (articles chosen by the noun's gender: where the
sentinel and a high temperature should show), and reordering (adjectives follow their noun, the verb
moves to the end).
"""

from __future__ import annotations

import random

N_NOUNS, N_ADJECTIVES, N_VERBS = 24, 12, 12


def _phrase(rng: random.Random) -> tuple[list[str], list[str]]:
    noun = rng.randrange(N_NOUNS)
    src, tgt = [], ["la" if noun % 2 else "le"]  # article: a function word with no source word
    adjective = rng.randrange(N_ADJECTIVES) if rng.random() < 0.5 else None
    if adjective is not None:
        src.append(f"adj{adjective}")
    src.append(f"noun{noun}")
    tgt.append(f"NOUN{noun}")
    if adjective is not None:
        tgt.append(f"ADJ{adjective}")  # adjective after the noun: local reordering
    return src, tgt


def sentence_pair(rng: random.Random) -> tuple[str, str]:
    """subject verb object [and object] -> subject object [et object] verb (verb-final)."""
    subject, obj = _phrase(rng), _phrase(rng)
    verb = rng.randrange(N_VERBS)
    src = subject[0] + [f"verb{verb}"] + obj[0]
    tgt = subject[1] + obj[1]
    if rng.random() < 0.3:
        extra = _phrase(rng)
        src += ["and"] + extra[0]
        tgt += ["et"] + extra[1]
    return " ".join(src), " ".join(tgt + [f"VERB{verb}", "ga"])  # "ga": a sentence-final particle


def generate(n_train: int = 4000, n_eval: int = 200, seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    rng = random.Random(seed)
    return {
        split: [sentence_pair(rng) for _ in range(n)]
        for split, n in (("train", n_train), ("dev", n_eval), ("test", n_eval))
    }
