# PYTHON_ARGCOMPLETE_OK
"""`nmt train | translate | evaluate | data`: one configuration, without Ray or MLflow."""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
from pathlib import Path

from nmt_core.config import (
    BOUNDS,
    CHOICES,
    SETTINGS,
    ConfigError,
    TrialConfig,
    build_config,
    load_config,
    parse_overrides,
)
from nmt_core.data.batches import Example, Vocab, cut_long
from nmt_core.data.corpora import REGISTRY, CorpusError, decode_lines, load_corpus, read_bounded, read_lines
from nmt_core.data.tokens import surface, tokenize
from nmt_core.gates.cli_common import GateParser, add_version, main_of
from nmt_core.gates.faults import report
from nmt_core.gates.gate import (
    append_line,
    check_output_folder,
    clip_path,
    escape,
    one_line,
    output_folder,
    shown,
    write_file,
)
from nmt_core.gates.network import configure_network
from nmt_core.gates.settings import help_lines
from nmt_core.gates.streams import closed, say
from nmt_core.models.transformer import head_labels
from nmt_core.training import checkpoint
from nmt_core.training.evaluate import attention_alignment, trace_table, write_traces
from nmt_core.training.inference import translate_lines
from nmt_core.training.progress import ConsoleProgress
from nmt_core.training.train import TrainingDiverged, score_text, teacher_forced_weights, train


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


RESUMABLE_CHANGES = {"train.epochs", "train.device"}  # training longer, or elsewhere, is what resuming is for
OUTPUTS = (checkpoint.LAST, checkpoint.BEST, "metrics.jsonl", "final.json", "translations")


def changed_keys(saved: dict, cfg: TrialConfig) -> list[str]:
    """`key (old -> new)` for every setting, other than RESUMABLE_CHANGES, that differs from the saved run's."""
    before, after = build_config(saved).flat(), cfg.flat()
    return [
        f"{k} ({before.get(k)!r} -> {after.get(k)!r})"
        for k in sorted(after)
        if before.get(k) != after.get(k) and k not in RESUMABLE_CHANGES
    ]


def remove_outputs(out: Path) -> None:
    """--restart: the earlier run's files in `out`; a link among them is removed, never followed."""
    for name in OUTPUTS:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def cmd_train(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, parse_overrides(args.set))
    out = check_output_folder(args.out, "--out", "nmt train", ConfigError)  # made by the first epoch
    last = out / checkpoint.LAST
    earlier = last.exists() or last.is_symlink()
    if earlier and args.restart:  # removed unread: a damaged or foreign last.pt is what --restart clears
        remove_outputs(out)
        _log(f"--restart: removed the earlier run in {clip_path(out)}")
        earlier = False
    resume = checkpoint.load_resume(out) if earlier else None
    if resume:
        changed = changed_keys(resume["config"], cfg)
        if changed:
            raise ConfigError(
                "--out",
                f"{clip_path(out)} holds a run trained with other settings: {', '.join(changed)}; pass "
                "--restart to train from scratch there, or choose another --out",
                "nmt train",
            )
        _log(f"resuming from {clip_path(last)} after epoch {resume['epoch']}")

    def on_epoch_end(report: dict, state: dict, is_best: bool) -> None:
        output_folder(out, "--out", "nmt train", ConfigError)  # the first epoch makes it: a bad corpus leaves nothing
        checkpoint.save_epoch(out, state, is_best)
        append_line(out / "metrics.jsonl", json.dumps(report) + "\n")

    result = train(cfg, on_epoch_end, resume, log=_log, step_progress=ConsoleProgress())
    for name, test in result.tests.items():
        folder = output_folder(out / "translations", "--out", "nmt train", ConfigError)
        write_file(folder, f"{name}.txt", ("\n".join(test.hypotheses) + "\n").encode(), ConfigError, "--out")
    write_file(out, "final.json", (json.dumps(result.final, indent=2) + "\n").encode(), ConfigError, "--out")
    print(json.dumps(result.final))
    return 0


def load_model(args: argparse.Namespace) -> checkpoint.LoadedModel:
    """--checkpoint (a folder or .pt file) or --model (an MLflow model URI)."""
    if args.model is not None:  # an empty --model is refused as a model URI, not read as no model
        from nmt_core.mlflow_model import downloaded_model

        with downloaded_model(args.model, args.tracking_uri) as path:  # the copy is removed once it is loaded
            return checkpoint.load_for_inference(path)
    return checkpoint.load_for_inference(args.checkpoint, log=_log)


def check_beam(args: argparse.Namespace, command: str) -> None:
    """--beam within decode.beam_size's bound, refused before a model is loaded."""
    limit = int(BOUNDS["decode.beam_size"].high)
    if not 0 <= args.beam <= limit:
        raise ConfigError(
            "--beam", f"must be in [1, {limit}], or 0 for the config's decode.beam_size (got {args.beam})", command
        )


def cmd_translate(args: argparse.Namespace) -> int:
    check_beam(args, "nmt translate")
    if closed("stdin"):  # `<&-`: nothing to read, said before a model is downloaded
        raise ConfigError("stdin", "is closed; give the sentences on it (nmt translate ... < source.txt)", "translate")
    loaded = load_model(args)
    lines = decode_lines(read_bounded(sys.stdin.buffer, "stdin"), "stdin")
    hypotheses, _, _ = translate_lines(lines, loaded, args.beam or loaded.config.decode.beam_size, "stdin")
    sys.stdout.write("".join(escape(h) + "\n" for h in hypotheses))  # a model's words shown, never acted on
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    check_beam(args, "nmt evaluate")
    check_traces(args.traces)
    loaded = load_model(args)
    sources, references = read_lines(Path(args.src)), read_lines(Path(args.ref))
    if len(sources) != len(references):
        raise CorpusError(f"{args.src}: {len(sources)} lines but {args.ref} has {len(references)}")
    gold = read_links(args.align, len(sources)) if args.align else []
    hypotheses, keep, decoded = translate_lines(sources, loaded, args.beam or loaded.config.decode.beam_size, args.src)
    bleu, paper = score_text(hypotheses, references, loaded.tgt_segmenter, loaded.config, args.lowercase)
    print(f"{bleu}\nmulti-bleu {paper}")  # against the raw reference text, as in training
    if args.align:
        limit = loaded.config.decode.max_src_len  # the sources were cut, and named, above; references are cut too
        examples = [
            Example(loaded.src_vocab.encode(s), loaded.tgt_vocab.encode(r))
            for s, r in zip(
                cut_long([loaded.src_segmenter.tokenize(s) for s in sources], limit, args.src, lambda line: None),
                cut_long([loaded.tgt_segmenter.tokenize(r) for r in references], limit, args.ref, _log),
            )
        ]
        keep = [i for i, e in enumerate(examples) if e.src and e.tgt]
        weights = teacher_forced_weights(
            loaded.model, [examples[i] for i in keep], loaded.config, next(loaded.model.parameters()).device
        )
        score = attention_alignment(weights, [gold[i] for i in keep])
        print(
            f"attention as alignment (reference forced, argmax): AER {score.aer:.4f}, "
            f"attention mass on gold links {score.gold_mass:.4f}"
        )
    if args.traces:
        table = trace_table(
            decoded,
            [[surface(t) for t in loaded.tgt_vocab.decode(d.tokens)] for d in decoded],
            head_labels(loaded.model),
        )
        write_traces(table, args.traces)
        _log(f"traces: {table.num_rows} target tokens -> {args.traces}")
    return 0


def check_traces(path: str | None) -> None:
    """--traces names a file in an existing folder: refused before decoding, not after the scores."""
    try:
        usable = not path or (
            not Path(path).is_dir() and not Path(path).is_symlink() and Path(path).absolute().parent.is_dir()
        )
    except (OSError, ValueError):  # a name no path can be (too long, or holding a NUL)
        usable = False
    if not usable:
        raise ConfigError(
            "--traces",
            f"must name a Parquet file in an existing folder, not a link (got {shown(path)})",
            "nmt evaluate",
        )


def read_links(path: str, count: int) -> list[list[tuple[int, int]]]:
    """Gold alignments, one line per source sentence, all checked before anything is decoded."""
    lines = read_lines(Path(path))
    if len(lines) != count:
        raise CorpusError(f"{path}: {len(lines)} lines but --src has {count}; one line of links per sentence")
    return [parse_links(line, f"{path}: line {number}") for number, line in enumerate(lines, 1)]


LINK = re.compile(r"([0-9]{1,9})-([0-9]{1,9})")


def parse_links(line: str, where: str) -> list[tuple[int, int]]:
    """Pharaoh format: `src-tgt` zero-based pairs separated by spaces."""
    links = []
    for pair in line.split():
        match = LINK.fullmatch(pair)
        if match is None:
            raise CorpusError(
                f"{where}: not a Pharaoh link `src-tgt` of zero-based word positions, such as 0-1 (got {shown(pair)})"
            )
        links.append((int(match[1]), int(match[2])))
    return links


def cmd_data(args: argparse.Namespace) -> int:
    cfg = build_config({"data": {"corpus": args.name, "src": args.src, "tgt": args.tgt}}).data
    corpus = load_corpus(cfg.corpus, cfg.src, cfg.tgt, cfg.cache_dir)
    if args.action == "prepare":
        print(f"{corpus.name}: prepared, {sum(len(p) for p in corpus.splits.values()):,} pairs")
        return 0
    total = sum(len(p) for p in corpus.splits.values())
    print(
        f"{corpus.name} ({corpus.src_lang}-{corpus.tgt_lang}): {total:,} pairs; "
        f"licence: {corpus.licence or 'see source'}"
    )
    train_tokens = [(tokenize(s, cfg), tokenize(t, cfg)) for s, t in corpus.splits["train"]]
    vocabs = [
        Vocab.build([pair[side] for pair in train_tokens], size, cfg.min_freq)
        for side, size in ((0, cfg.src_vocab), (1, cfg.tgt_vocab))
    ]
    for split, pairs in corpus.splits.items():
        toks = train_tokens if split == "train" else [(tokenize(s, cfg), tokenize(t, cfg)) for s, t in pairs]
        parts = []
        for side, vocab in enumerate(vocabs):
            lengths = [len(pair[side]) for pair in toks]
            tokens = [w for pair in toks for w in pair[side]]
            covered = sum(w in vocab.index for w in tokens) / max(len(tokens), 1)
            parts.append(
                f"{(corpus.src_lang, corpus.tgt_lang)[side]} mean {sum(lengths) / max(len(lengths), 1):.1f} "
                f"max {max(lengths, default=0)} words, vocab coverage {100 * covered:.1f}%"
            )
        print(f"  {split:>8}: {len(pairs):>7,} pairs | " + " | ".join(parts))
    print(
        f"  vocabularies (top {cfg.src_vocab:,}/{cfg.tgt_vocab:,} training words): "
        f"{len(vocabs[0]) - 4:,} / {len(vocabs[1]) - 4:,}"
    )
    rng = random.Random(args.seed)
    for src, tgt in rng.sample(corpus.splits["train"], min(args.samples, len(corpus.splits["train"]))):
        print(f"  | {escape(src)}\n  | {escape(tgt)}\n")
    return 0


def add_model_options(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--checkpoint",
        help="a training output folder, a Ray trial checkpoint folder or a .pt file (the best-dev weights are used)",
    )
    which.add_argument(
        "--model", help="an MLflow model: models:/<sweep>/<version>, models:/<sweep>@<alias> or runs:/<run id>/model"
    )
    p.add_argument(
        "--tracking-uri",
        help="the MLflow store --model is read from (default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db)",
    )
    p.add_argument("--beam", type=int, default=0, help="beam size (default: the config's decode.beam_size)")


def build_parser() -> argparse.ArgumentParser:
    parser = GateParser(prog="nmt", description=__doc__)
    add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True, help="what to do (each has its own --help)")
    p = sub.add_parser(
        "train",
        help="train one configuration; resumes if --out holds last.pt",
        epilog="settings (the config's sections, or --set KEY=VALUE):\n" + help_lines(SETTINGS, dict(CHOICES.items())),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("config", help="trial config YAML (sections data, model, attention, train, decode)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a dotted key")
    p.add_argument(
        "--out",
        default="runs/nmt",
        help="output folder: last.pt, best.pt, metrics.jsonl (default "
        "%(default)s); a folder holding a run resumes it, if only train.epochs or train.device differ",
    )
    p.add_argument("--restart", action="store_true", help="remove the run in --out and train from scratch")
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("translate", help="translate stdin line by line to stdout")
    add_model_options(p)
    p.set_defaults(func=cmd_translate)
    p = sub.add_parser("evaluate", help="BLEU (with its sacrebleu signature) and optional per-token traces")
    add_model_options(p)
    p.add_argument("--src", required=True, help="source sentences, one per line")
    p.add_argument("--ref", required=True, help="reference translations, one per line (raw text, as in training)")
    p.add_argument(
        "--lowercase",
        action="store_true",
        help="case-insensitive BLEU (the papers' lowercased tokenised number is printed as multi-bleu)",
    )
    p.add_argument("--traces", help="write per-token traces (tau, gate, attention) to this Parquet file")
    p.add_argument(
        "--align",
        help="gold word alignments (Pharaoh `src-tgt` per line): report the AER of the "
        "attention argmax on the reference and the attention mass on gold links",
    )
    p.set_defaults(func=cmd_evaluate)
    p = sub.add_parser("data", help="prepare a corpus into the cache, or print its statistics")
    p.add_argument(
        "action", choices=["prepare", "info"], help="prepare: fetch and cache it; info: its statistics and sample pairs"
    )
    p.add_argument("name", help=f"synthetic, {', '.join(REGISTRY)}, or a folder")
    p.add_argument("--src", default="en", help="source language of a folder corpus")
    p.add_argument("--tgt", default="vi", help="target language of a folder corpus")
    p.add_argument("--samples", type=int, default=3, help="random training pairs to print")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample drawn (default %(default)s)")
    p.set_defaults(func=cmd_data)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse and run the subcommand; its refusals are one line (exit 2), and whatever else is raised is the last-resort
    handler's one line (nmt_core/gates/faults.py: exit 2 for a store that failed, 1 for a fault, the traceback behind
    --debug)."""
    return main_of(build_parser, run_command, argv)


def run_command(args: argparse.Namespace) -> int:
    """The parsed command; its refusal one line (exit 2), whatever else is raised the last-resort handler's."""
    try:
        configure_network(ConfigError)  # MLflow's calls (--model) under a deadline and a cap ($NMT_SWEEPER_TIMEOUT)
        return args.func(args)
    except (ConfigError, CorpusError, checkpoint.CheckpointError) as err:
        say(f"nmt: error: {one_line(err)}")  # the gate out: one line, no control character
        return 2
    except TrainingDiverged as err:
        say(f"nmt: training diverged: {one_line(err)}")
        return 1
    except KeyboardInterrupt:
        say("nmt: interrupted")
        return 130
    except Exception as err:  # noqa: BLE001 - the last resort: one line, never a traceback
        return report("nmt", err, args.debug)


if __name__ == "__main__":
    sys.exit(main())
