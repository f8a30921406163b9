"""Fingerprints of every shipped variant: proof that a refactor of the model kept its numbers.

For every variant of every space in `search_spaces/*.yaml` (planned as a sweep would: `sweeper.space.spec.load_spec` and
`plan_trials`; one entry per distinct set of parameters, seeds left out), the trial config is shrunk to tiny sizes
with every attention setting kept (`corpus: synthetic`, d 16, 2 layers and 2 heads for the Transformer, fp32 on the
CPU, no compile) and this script records, with fixed seeds and one thread:

- the parameters: a hash of their names and shapes, and one of each one's initial values, in registration order;
- one training step on a fixed batch of synthetic pairs (`nmt_core.training.train.batch_loss`, clipped Adam): the loss,
the
  gradient norm before clipping, and a hash of the teacher-forced trace (weights, tau, gate) and of the parameters
  after the update;
- greedy and beam (3) search on the same sources: the tokens, the scores and a hash of tau and the gate.

Save the fingerprints of one commit, change the code, and compare:

    python benchmarks/fingerprints.py --out before.json            # on the commit before the change
    python benchmarks/fingerprints.py --compare before.json        # after it: exit 1 and name what differs

`EXTRA` adds variants no shipped space has yet (the learned temperature, in both architectures; the mechanisms after
SACT of issue 72).
`benchmarks/fingerprints_main.json` holds main's at c189bae, before the declarations were parted from the
implementations and the Transformer's heads joined the RNN's pipeline (#60): its 193 variants.

Equal means bit for bit (floats are stored by `repr`, tensors hashed by their bytes). Parameter names may change
only with a rename in checkpoint loading; `--compare` lists the variants whose names, values or numbers differ.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent.parent))
from nmt_core.config import TrialConfig, build_config  # noqa: E402
from nmt_core.data.batches import Batch, Example, collate  # noqa: E402
from nmt_core.data.synthetic import generate  # noqa: E402
from nmt_core.models.build import build_model  # noqa: E402
from nmt_core.models.rnn import PAD  # noqa: E402
from nmt_core.training.decode import Translation, beam_search, greedy  # noqa: E402
from nmt_core.training.train import batch_loss, build_optimizer  # noqa: E402
from sweeper.space.spec import load_spec, plan_trials, trial_config, variant_label  # noqa: E402

ROOT = Path(__file__).parent.parent
PAIRS = 6  # synthetic sentence pairs in the one batch every variant trains and decodes
TINY = {
    "model": {"emb_size": 16, "hidden_size": 16, "ff_size": 32, "layers": 2, "heads": 2, "compile": "none"},
    "train": {"amp": False, "device": "cpu", "token_budget": 0},
    "decode": {"beam_size": 3, "max_len_ratio": 1.5, "max_len_offset": 3},
    "data": {"corpus": "synthetic", "src_vocab": 60, "tgt_vocab": 60},
}


def tiny_config(cfg: TrialConfig) -> TrialConfig:
    """The trial's config at tiny sizes, its attention settings (and every other setting) kept."""
    nested = cfg.to_dict()
    for section, values in TINY.items():
        nested[section].update(values)
    for key in ("encoder_layers", "decoder_layers"):
        nested["model"][key] = min(nested["model"][key], 2)
    if nested["model"]["arch"] == "rnn":  # keys the RNN refuses away from their defaults
        for key in ("ff_size", "layers", "heads"):
            del nested["model"][key]
    return build_config(nested)


def synthetic_batch() -> tuple[Batch, int, int]:
    """PAIRS synthetic pairs as one batch with diagonal word links (guided alignment reads them), and the sizes of
    the two vocabularies (specials first, as nmt_core.data.batches.Vocab numbers them)."""
    pairs = generate(n_train=PAIRS, n_eval=0, seed=0)["train"]
    vocab = {
        side: {w: i + 4 for i, w in enumerate(sorted({w for pair in pairs for w in pair[side].split()}))}
        for side in (0, 1)
    }
    examples = []
    for src, tgt in pairs:
        s, t = src.split(), tgt.split()
        links = [(min(j, len(s) - 1), j) for j in range(len(t))]
        examples.append(Example([vocab[0][w] for w in s], [vocab[1][w] for w in t], links))
    return collate(examples, list(range(PAIRS))), len(vocab[0]) + 4, len(vocab[1]) + 4


def digest(*tensors: torch.Tensor | None) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(b"-" if t is None else t.detach().float().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def decoded(translations: list[Translation]) -> dict[str, Any]:
    """The tokens of each sentence (padding after </s> left out), and one hash of the scores and traces."""
    traces = [
        torch.tensor([t.score]) if field == "score" else None if value is None else torch.as_tensor(value)
        for t in translations
        for field, value in (("score", t.score), ("weights", t.weights), ("tau", t.tau), ("gate", t.gate))
        + (("tau_heads", t.tau_heads),)
    ]
    return {"tokens": [[i for i in t.tokens if i != PAD] for t in translations], "scores_traces": digest(*traces)}


def fingerprint(cfg: TrialConfig, batch: Batch, src_vocab: int, tgt_vocab: int) -> dict[str, Any]:
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model, cfg.attention, src_vocab, tgt_vocab)
    named = list(model.named_parameters())
    optimizer = build_optimizer(model, cfg)
    torch.manual_seed(cfg.train.seed + 1)  # dropout
    model.train()
    loss, trace = batch_loss(model, batch, cfg)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.clip_norm)
    optimizer.step()
    model.eval()
    with torch.no_grad():
        greedy_out = decoded(greedy(model, batch, cfg.decode))
        beam_out = decoded(beam_search(model, batch, cfg.decode, cfg.decode.beam_size))
    return {
        "param_names": hashlib.sha256(repr([(n, tuple(p.shape)) for n, p in named]).encode()).hexdigest()[:16],
        "param_values": [digest(p)[:8] for _, p in named],  # in registration order
        "loss": repr(loss.item()),
        "grad_norm": repr(norm.item()),
        "trace": digest(trace.weights, trace.tau, trace.gate, trace.scores),
        "updated": digest(*model.parameters()),
        "greedy": greedy_out,
        "beam": beam_out,
    }


# variants no shipped space has yet, each the defaults with these keys: `extra: label {params}`
TRANSFORMER = {"model.arch": "transformer"}
FAIR_PORT = {"attention.sact_base": True, "attention.qk_norm": True, "attention.lambda": 10.0}  # SACT's, issue 72
EXTRA = (
    {"attention.temperature": "learned"},
    {"model.arch": "transformer", "attention.temperature": "learned", "attention.temperature_at": "both"},
    # the mechanisms after SACT (issue 72)
    {"attention.temperature": "sact", "attention.sact_base": True},
    {**TRANSFORMER, **FAIR_PORT, "attention.temperature": "sact", "attention.sact_reading": "tempered"},
    {**TRANSFORMER, **FAIR_PORT, "attention.temperature": "learned"},
    {"model.input_feeding": False, "model.encoder_merge": "sum", "attention.temperature": "sact_released"},
    {"attention.temperature": "ssmax"},
    {"attention.temperature": "ssmax_fixed"},
    {**TRANSFORMER, "attention.temperature": "ssmax", "attention.temperature_at": "both"},
    {"attention.temperature": "selective"},
    {**TRANSFORMER, "attention.temperature": "selective"},
    {"attention.softcap": True, "attention.cap": 5.0},
    {**TRANSFORMER, "attention.softcap": True, "attention.cap": 5.0},
    {"attention.normaliser": "entmax"},
    {"attention.normaliser": "entmax_learned"},
    {**TRANSFORMER, "attention.normaliser": "entmax_learned"},
    {"attention.entropy_sharpening": True},
    {**TRANSFORMER, "attention.entropy_sharpening": True},
)


def variants(pattern: str) -> dict[str, TrialConfig]:
    """`space.yaml: label {params}` -> the tiny config of its first seed, for every distinct set of parameters;
    then the EXTRA variants."""
    out = {}
    for params in EXTRA:
        cfg = tiny_config(trial_config({}, params, 1))
        out[f"extra: {variant_label(cfg)} {json.dumps(params, sort_keys=True)}"] = cfg
    for path in sorted(glob.glob(str(ROOT / pattern))):
        spec = load_spec(path)
        for plan in plan_trials(spec):
            key = f"{Path(path).name}: {plan.variant} {json.dumps(plan.params, sort_keys=True, default=str)}"
            if key not in out:
                out[key] = tiny_config(plan.config(spec.base))
    return out


def fingerprints(pattern: str, only: str = "") -> dict[str, Any]:
    torch.set_num_threads(1)
    batch, src_vocab, tgt_vocab = synthetic_batch()
    return {key: fingerprint(cfg, batch, src_vocab, tgt_vocab) for key, cfg in variants(pattern).items() if only in key}


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """One line per variant (and field) that is not bit for bit equal, or that is gone. A variant with no
    fingerprint before (a new space or EXTRA variant) is no difference: `main` names it."""
    lines = [f"only before: {key}" for key in before if key not in after]
    for key in before.keys() & after.keys():
        lines += [f"{key}: {field}" for field in before[key] if before[key][field] != after[key].get(field)]
    return sorted(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spaces", default="search_spaces/*.yaml", help="glob below the repository root")
    parser.add_argument("--only", default="", help="only variants whose key contains this")
    parser.add_argument("--out", help="write the fingerprints here (JSON)")
    parser.add_argument("--compare", help="fingerprints saved before: exit 1 where these differ")
    args = parser.parse_args(argv)
    prints = fingerprints(args.spaces, args.only)
    if args.out:
        lines = (f"{json.dumps(key)}: {json.dumps(value, sort_keys=True)}" for key, value in sorted(prints.items()))
        Path(args.out).write_text("{\n" + ",\n".join(lines) + "\n}\n")  # one variant a line: diffs read well
    print(f"{len(prints)} variants fingerprinted")
    if args.compare:
        before = json.loads(Path(args.compare).read_text())
        if args.only:
            before = {key: value for key, value in before.items() if args.only in key}
        lines, new = differences(before, prints), [key for key in prints if key not in before]
        print("".join(f"new, no fingerprint before: {key}\n" for key in new), end="")
        same = len(prints) - len(new)
        print("\n".join(lines) if lines else f"all {same} fingerprinted before equal to {args.compare}, bit for bit")
        return 1 if lines else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
