"""Peer parity: joeynmt 2.3's recurrent model against our baseline, trained and scored on the same things.

Same corpus split and vocabularies (one `load_trial_data`), the same batches in the same order (our batcher,
same seeds), the same Adam (lr, betas 0.9/0.999, eps 1e-8), gradient clipping, epochs, sizes and dropout;
both keep their best-dev epoch (greedy dev BLEU) and decode the test set greedily; one BLEU function with one
sacrebleu signature. Each model is initialised its own way: joeynmt by its `initialize_model` defaults (Xavier,
forget-gate bias 1, embeddings Xavier), ours by PyTorch's defaults. Both use input feeding and the same score:
`--score general` (joeynmt's "luong") or `--score concat` (joeynmt's "bahdanau": v^T tanh(W s + U h), no biases,
queried with s_t after the RNN step in both).

`--arch transformer`: joeynmt 2.3's Transformer against ours, both TRANSFORMER_MODEL's sizes (pre-norm, scaled
embeddings, sinusoidal positions, label smoothing 0.1) and the same inverse square root schedule per update (ours,
`nmt_core.training.train.scheduled_lr`: joeynmt's `warmupinversesquareroot` formula without its floor); joeynmt decodes
greedily its own way (the decoder re-run over the whole prefix each step, as its `transformer_greedy`).

    bash benchmarks/install_joeynmt.sh      # joeynmt goes in benchmarks/.joeynmt, never in your environment
    python benchmarks/parity.py [--arch rnn|transformer] [--space search_spaces/quickstart.yaml]
                                [--score general|concat] [--epochs 10] [--lr LR] [--json parity.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import torch
import yaml
from torch import nn

sys.path.insert(0, str(Path(__file__).parent.parent))
from benchmarks.throughput import joeynmt_loss, load_joeynmt  # noqa: E402
from nmt_core.config import TrialConfig, build_config  # noqa: E402
from nmt_core.data.batches import Batch, TrialData, load_trial_data, make_batches  # noqa: E402
from nmt_core.models.rnn import BOS, EOS, PAD  # noqa: E402
from nmt_core.training.evaluate import bleu_options, corpus_bleu  # noqa: E402
from nmt_core.training.train import optimizer_step, scheduled_lr, train  # noqa: E402

JOEYNMT_ATTENTION = {"general": "luong", "concat": "bahdanau"}  # the same formulas under joeynmt's names
TRANSFORMER_MODEL = {
    "arch": "transformer",
    "emb_size": 128,
    "hidden_size": 128,
    "heads": 4,
    "layers": 3,
    "ff_size": 512,
    "dropout": 0.1,
    "norm": "pre",
}  # a small Transformer for the quickstart data
TRANSFORMER_TRAIN = {"lr": 2e-3, "schedule": "inverse_sqrt", "warmup": 200, "label_smoothing": 0.1}


class JoeyModel(nn.Module):
    """joeynmt's parts under the names its `initialize_model` expects."""

    def __init__(self, cfg: TrialConfig, src_vocab: int, tgt_vocab: int):
        super().__init__()
        RecurrentEncoder, RecurrentDecoder, Embeddings = load_joeynmt()
        m = cfg.model
        self.src_embed = Embeddings(embedding_dim=m.emb_size, vocab_size=src_vocab, padding_idx=PAD)
        self.trg_embed = Embeddings(embedding_dim=m.emb_size, vocab_size=tgt_vocab, padding_idx=PAD)
        self.encoder = RecurrentEncoder(
            rnn_type="lstm",
            hidden_size=m.hidden_size // 2,
            emb_size=m.emb_size,
            bidirectional=True,
            dropout=m.dropout,
            emb_dropout=m.dropout,
        )
        self.decoder = RecurrentDecoder(
            rnn_type="lstm",
            emb_size=m.emb_size,
            hidden_size=m.hidden_size,
            encoder=self.encoder,
            attention=JOEYNMT_ATTENTION[cfg.attention.score],
            vocab_size=tgt_vocab,
            dropout=m.dropout,
            emb_dropout=m.dropout,
            hidden_dropout=m.dropout,
            init_hidden="bridge",
            input_feeding=True,
        )
        from joeynmt.initialization import initialize_model

        initialize_model(self, {"encoder": {"type": "recurrent"}, "decoder": {"type": "recurrent"}}, PAD, PAD)
        self.smoothing = cfg.train.label_smoothing

    def encode(self, batch: Batch):
        order = batch.src_lengths.argsort(descending=True)  # joeynmt's encoder packs sorted batches
        src = batch.src[order]
        mask = (src != PAD).unsqueeze(1)
        output, hidden = self.encoder(self.src_embed(src), batch.src_lengths[order], mask)
        return order, output, hidden, mask

    def loss(self, batch: Batch) -> torch.Tensor:
        order, output, hidden, mask = self.encode(batch)
        tgt_in, tgt_out = batch.tgt_in[order], batch.tgt_out[order]
        logits, _, _, _ = self.decoder(
            trg_embed=self.trg_embed(tgt_in),
            encoder_output=output,
            encoder_hidden=hidden,
            src_mask=mask,
            unroll_steps=tgt_in.size(1),
            trg_mask=(tgt_in != PAD).unsqueeze(1),
        )
        return joeynmt_loss(logits, tgt_out, batch.n_tokens, self.smoothing)

    @torch.no_grad()
    def greedy(self, batch: Batch, max_len: int) -> list[list[int]]:
        order, output, hidden, mask = self.encode(batch)
        y = torch.full((order.numel(), 1), BOS, dtype=torch.long)
        state, att, tokens = None, None, []
        for _ in range(max_len):
            logits, state, _, att = self.decoder(
                trg_embed=self.trg_embed(y),
                encoder_output=output,
                encoder_hidden=hidden,
                src_mask=mask,
                unroll_steps=1,
                hidden=state,
                prev_att_vector=att,
                trg_mask=torch.ones_like(y, dtype=torch.bool).unsqueeze(1),
            )
            y = logits.argmax(-1)
            tokens.append(y)
            if (torch.cat(tokens, 1) == EOS).any(1).all():
                break
        ids = torch.cat(tokens, 1)[order.argsort()]  # back to the batch's order
        return ids.tolist()


class JoeyTransformer(nn.Module):
    """joeynmt's Transformer parts under the names its `initialize_model` expects (Xavier, embeddings N(0, 0.01))."""

    def __init__(self, cfg: TrialConfig, src_vocab: int, tgt_vocab: int):
        super().__init__()
        TransformerEncoder, TransformerDecoder, Embeddings = load_joeynmt("transformer")
        m = cfg.model
        shape = {
            "hidden_size": m.hidden_size,
            "ff_size": m.ff_size,
            "num_layers": m.layers,
            "num_heads": m.heads,
            "dropout": m.dropout,
            "emb_dropout": m.dropout,
            "layer_norm": m.norm,
        }
        self.src_embed = Embeddings(embedding_dim=m.hidden_size, scale=True, vocab_size=src_vocab, padding_idx=PAD)
        self.trg_embed = Embeddings(embedding_dim=m.hidden_size, scale=True, vocab_size=tgt_vocab, padding_idx=PAD)
        self.encoder, self.decoder = TransformerEncoder(**shape), TransformerDecoder(vocab_size=tgt_vocab, **shape)
        from joeynmt.initialization import initialize_model

        initialize_model(self, {"encoder": {"type": "transformer"}, "decoder": {"type": "transformer"}}, PAD, PAD)
        self.smoothing = cfg.train.label_smoothing

    def decode(self, encoded: torch.Tensor, mask: torch.Tensor, tgt_in: torch.Tensor, tgt_mask: torch.Tensor):
        return self.decoder(
            trg_embed=self.trg_embed(tgt_in),
            encoder_output=encoded,
            encoder_hidden=None,
            src_mask=mask,
            unroll_steps=tgt_in.size(1),
            hidden=None,
            trg_mask=tgt_mask,
        )[0]

    def loss(self, batch: Batch) -> torch.Tensor:
        mask = (batch.src != PAD).unsqueeze(1)
        encoded, _ = self.encoder(self.src_embed(batch.src), batch.src_lengths, mask)
        logits = self.decode(encoded, mask, batch.tgt_in, (batch.tgt_in != PAD).unsqueeze(1))
        return joeynmt_loss(logits, batch.tgt_out, batch.n_tokens, self.smoothing)

    @torch.no_grad()
    def greedy(self, batch: Batch, max_len: int) -> list[list[int]]:
        mask = (batch.src != PAD).unsqueeze(1)
        encoded, _ = self.encoder(self.src_embed(batch.src), batch.src_lengths, mask)
        ys = torch.full((batch.src.size(0), 1), BOS, dtype=torch.long)
        for _ in range(max_len):
            logits = self.decode(encoded, mask, ys, mask.new_ones(1, 1, 1))
            ys = torch.cat([ys, logits[:, -1].argmax(-1, keepdim=True)], 1)
            if (ys == EOS).any(1).all():
                break
        return ys[:, 1:].tolist()


JOEY_MODELS = {"rnn": JoeyModel, "transformer": JoeyTransformer}


def joey_bleu(model: JoeyModel, data: TrialData, split: str, cfg: TrialConfig) -> tuple[float, str]:
    model.eval()
    hypotheses = [""] * len(data.splits[split])
    for batch in make_batches(data.splits[split], cfg.train.batch_size):
        max_len = int(batch.src_lengths.max() * cfg.decode.max_len_ratio) + cfg.decode.max_len_offset
        for i, ids in zip(batch.index, model.greedy(batch, max_len)):
            hypotheses[i] = data.tgt_segmenter.detokenize(data.tgt_vocab.decode(ids))
    result = corpus_bleu(hypotheses, data.references[split], **bleu_options(cfg))
    return result.score, result.signature


def train_joeynmt(cfg: TrialConfig, data: TrialData) -> dict:
    torch.manual_seed(cfg.train.seed)
    model = JOEY_MODELS[cfg.model.arch](cfg, len(data.src_vocab), len(data.tgt_vocab))
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr, betas=(0.9, 0.999), eps=1e-8)
    best, best_state, tokens, seconds, curve, updates = -1.0, None, 0, 0.0, [], 0
    for epoch in range(1, cfg.train.epochs + 1):
        model.train()
        start = time.perf_counter()
        for batch in make_batches(
            data.splits["train"],
            cfg.train.batch_size,
            cfg.train.token_budget,
            shuffle_seed=cfg.train.seed * 100_003 + epoch,
        ):  # the batches ours trains on
            updates += 1
            for group in optimizer.param_groups:
                group["lr"] = scheduled_lr(cfg, updates)  # train.lr itself unless train.schedule says otherwise
            optimizer_step(optimizer, model.loss(batch), model.parameters(), cfg.train.clip_norm)
            tokens += batch.n_tokens
        seconds += time.perf_counter() - start
        dev = joey_bleu(model, data, "dev", cfg)[0]
        curve.append(dev)
        print(f"joeynmt epoch {epoch}: dev BLEU {dev:.2f}", file=sys.stderr)
        if dev > best:
            best, best_state = dev, copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    test, signature = joey_bleu(model, data, "test", cfg)
    return {
        "bleu_test": test,
        "signature": signature,
        "bleu_dev_by_epoch": curve,
        "tokens_per_s": tokens / seconds,
        "n_params": sum(p.numel() for p in model.parameters()),
    }


def train_ours(cfg: TrialConfig, data: TrialData) -> dict:
    result = train(cfg, log=lambda line: print("ours " + line, file=sys.stderr), data=data)
    history = result.history
    return {
        "bleu_test": result.final["bleu_test_test"],
        "signature": result.tests["test"].signature,
        "bleu_dev_by_epoch": [h["bleu_dev"] for h in history],
        "tokens_per_s": sum(h["tokens_per_s"] * h["epoch_time_s"] for h in history)
        / sum(h["epoch_time_s"] for h in history),
        "n_params": result.final["n_params"],
    }


def parity_config(space: Path, score: str, epochs: int, lr: float | None, arch: str = "rnn") -> TrialConfig:
    """The space's data, model and training, with plain attention of `score`, greedy decoding, fixed epochs; with
    arch transformer, TRANSFORMER_MODEL and TRANSFORMER_TRAIN in place of the space's model and rate."""
    raw = yaml.safe_load(space.read_text())
    base = copy.deepcopy(raw.get("base", {}))
    base["data"] = {**base.get("data", {}), **raw.get("data", {})}
    base["attention"] = {"score": score, "temperature": "none"} if arch == "rnn" else {}
    if arch == "transformer":
        base["model"], base["train"] = dict(TRANSFORMER_MODEL), {**base.get("train", {}), **TRANSFORMER_TRAIN}
    base["train"] = {
        **base.get("train", {}),
        "epochs": epochs,
        "lr_decay": 1.0,
        "early_stopping": 0,
        **({"lr": lr} if lr else {}),
    }
    base["decode"] = {**base.get("decode", {}), "beam_size": 1}
    return build_config(base, source=str(space))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--space", type=Path, default=Path(__file__).parent.parent / "search_spaces" / "quickstart.yaml"
    )
    parser.add_argument("--arch", choices=sorted(JOEY_MODELS), default="rnn")
    parser.add_argument("--score", choices=sorted(JOEYNMT_ATTENTION), default="general", help="rnn only")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, help="learning rate for both (default: the space's)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if load_joeynmt(args.arch) is None:
        sys.exit("joeynmt is not installed: bash benchmarks/install_joeynmt.sh")
    torch.set_num_threads(args.threads)
    cfg = parity_config(args.space, args.score, args.epochs, args.lr, args.arch)
    data = load_trial_data(cfg.data)
    results = {"joeynmt 2.3": train_joeynmt(cfg, data), "nmt_core": train_ours(cfg, data)}
    m = cfg.model
    what = f"score {args.score}" if args.arch == "rnn" else f"transformer {m.layers} layers d {m.hidden_size}"
    print(
        f"\n{len(data.splits['train']):,} training pairs, {what}, {args.epochs} epochs, lr {cfg.train.lr:g}, greedy, "
        f"signature {results['nmt_core']['signature']}"
    )
    print(f"{'model':<12} {'params':>10} {'test BLEU':>10} {'train tok/s':>12}  dev BLEU by epoch")
    for name, r in results.items():
        print(
            f"{name:<12} {r['n_params']:>10,} {r['bleu_test']:>10.2f} {r['tokens_per_s']:>12.0f}  "
            + " ".join(f"{v:.1f}" for v in r["bleu_dev_by_epoch"])
        )
    assert results["joeynmt 2.3"]["signature"] == results["nmt_core"]["signature"]
    if args.json:
        args.json.write_text(json.dumps({"config": cfg.to_dict(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
