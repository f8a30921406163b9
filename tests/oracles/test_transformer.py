"""The Transformer (model.arch transformer): its attention family against the papers' formulas in plain loops,
teacher forcing against step-by-step decoding, the fused path against the explicit one, the schedule, and the
config checks. float64 throughout, several heads and positions."""

import math
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import torch
import yaml
from torch.nn import functional as F

from nmt_core.config import ConfigError, build_config, parse_overrides
from nmt_core.data.batches import Example, make_batches
from nmt_core.models.build import build_model
from nmt_core.models.multihead import BlockParts, MultiHeadAttention
from nmt_core.training.decode import beam_search, greedy
from nmt_core.training.diagnostics import AttentionDiagnostics
from nmt_core.training.train import batch_loss, scheduled_lr
from tests.conftest import tiny_config

HEADS, SIZE = 3, 12


def transformer_config(model=None, **attention):
    return tiny_config(
        model={
            "arch": "transformer",
            "emb_size": SIZE,
            "hidden_size": SIZE,
            "heads": HEADS,
            "layers": 2,
            "ff_size": 24,
            **(model or {}),
        },
        attention=attention,
    )


def block(parts: BlockParts, **attention) -> MultiHeadAttention:
    torch.manual_seed(0)
    module = MultiHeadAttention(SIZE, HEADS, 0.0, transformer_config(**attention).attention, parts).double().eval()
    for p in module.parameters():  # no zero biases: a dropped term must show
        torch.nn.init.uniform_(p, -0.6, 0.6)
    return module


def head(w: torch.nn.Linear, x: torch.Tensor, h: int) -> torch.Tensor:
    """Head h's slice of the projection w x."""
    d = SIZE // HEADS
    return (w.weight @ x + w.bias)[h * d : (h + 1) * d]


def unit(v: torch.Tensor) -> torch.Tensor:
    """v / ||v||, the Euclidean norm summed out element by element (Henry et al. 2020's q^ and k^)."""
    return v / math.sqrt(sum(c.item() ** 2 for c in v))


def oracle(m: MultiHeadAttention, x, memory, real: list[int], cfg):
    """The block by the papers' formulas, one batch row, head and position at a time (module docstring). With
    qk_norm every head's query and key (the slot's too) are unit vectors and the score is their cosine: no 1/sqrt(d_k),
    the temperature its only scale (Henry et al. 2020)."""
    d, lam, qk = SIZE // HEADS, cfg.lambda_, m.parts.qk_norm
    scale = 1.0 if m.parts.score == "dot" or qk else math.sqrt(d)  # V eq. 1's 1/sqrt(d_k), which `dot` leaves out

    def query(b: int, i: int, h: int) -> torch.Tensor:
        q = head(m.W_Q, x[b, i], h)
        return unit(q) if qk else q

    def key(vector: torch.Tensor, h: int) -> torch.Tensor:
        k = head(m.W_K, vector, h)
        return unit(k) if qk else k

    B, T = x.size(0), x.size(1)
    outs = torch.zeros(B, T, SIZE, dtype=torch.float64)
    taus, gates = torch.zeros(B, HEADS, T, dtype=torch.float64), torch.zeros(B, HEADS, T, dtype=torch.float64)
    for b in range(B):
        for i in range(T):
            heads = []
            for h in range(HEADS):
                q, raw_q = query(b, i, h), head(m.W_Q, x[b, i], h)
                keys = [key(memory[b, j], h) for j in range(real[b])]
                values = [head(m.W_V, memory[b, j], h) for j in range(real[b])]
                e = [float(q @ k) / scale for k in keys]
                if m.parts.position_bias == "gaussian":  # Yang et al. 2018 eqs. 8-10
                    hidden = torch.tanh(m.position.W_p.weight @ raw_q)  # the query as projected
                    centre = real[b] * torch.sigmoid(m.position.v_p[h] @ hidden)
                    sigma = real[b] * torch.sigmoid(m.position.v_d[h] @ hidden) / 2
                    e = [e_j - (j - centre) ** 2 / (2 * sigma**2) for j, e_j in enumerate(e)]
                tau = 1.0
                if m.parts.temperature == "fixed":
                    tau = cfg.tau
                elif m.parts.temperature == "sact":  # S eqs. 1-2 per head
                    beta = m.temperature.U_s.weight[h] @ x[b, i]
                    if m.temperature.U_s.bias is not None:
                        beta = beta + m.temperature.U_s.bias[h]
                    if cfg.sact_reading == "first_pass" and i > 0:  # c0_{i-1}: tau = 1 at position i - 1
                        e_prev = [float(query(b, i - 1, h) @ k) / scale for k in keys]
                        if m.parts.position_bias == "gaussian":
                            raise AssertionError("not combined in this oracle")
                        a_prev = F.softmax(torch.tensor(e_prev, dtype=torch.float64), 0)
                        beta = beta + m.temperature.reading.W_c[h] @ sum(a * v for a, v in zip(a_prev, values))
                    tau = lam ** torch.tanh(beta)
                elif m.parts.temperature == "learned":  # S eqs. 1-2 without their input: one b per head
                    tau = lam ** torch.tanh(m.temperature.b[h])
                logits = [e_j / tau for e_j in e]
                slot_value = None
                if m.parts.sentinel:  # Li & Zhu eqs. 7-8, 10, with x_{i-1} for t_{i-1}
                    s = m.sentinel
                    x_prev = x[b, i - 1] if i > 0 else torch.zeros(SIZE, dtype=torch.float64)
                    g = torch.sigmoid(s.W_x.weight @ x[b, i] + s.W_t.weight @ x_prev)
                    sentinel = g * torch.tanh(s.W_s.weight @ x[b, i])
                    logits.append(float(q @ key(sentinel, h)) / scale / tau)
                    slot_value = head(m.W_V, sentinel, h)
                alpha = F.softmax(torch.tensor(logits, dtype=torch.float64), 0)
                context = sum(alpha[j] * values[j] for j in range(real[b]))
                if slot_value is not None:
                    context = context + alpha[-1] * slot_value  # c+ = beta s + sum alpha v (A eq. 9)
                    gates[b, h, i] = alpha[-1]
                taus[b, h, i] = tau
                heads.append(context)
            outs[b, i] = m.W_O.weight @ torch.cat(heads) + m.W_O.bias
    return outs, taus, gates


MECHANISMS = [
    (BlockParts(temperature="fixed"), {"temperature": "fixed", "tau": 0.7}),
    (BlockParts(temperature="sact"), {"temperature": "sact", "lambda": 3.0, "sact_reading": "query"}),
    (
        BlockParts(temperature="sact"),
        {"temperature": "sact", "lambda": 3.0, "sact_reading": "query", "sact_bias": True},
    ),
    (BlockParts(temperature="sact"), {"temperature": "sact", "lambda": 3.0, "sact_reading": "first_pass"}),
    (BlockParts(temperature="learned"), {"temperature": "learned", "lambda": 3.0}),
    (BlockParts(position_bias="gaussian"), {"position_bias": "gaussian"}),
    (BlockParts(sentinel=True), {"sentinel": True}),
    (BlockParts(score="dot", sentinel=True), {"score": "dot", "sentinel": True}),
    (
        BlockParts(temperature="sact", sentinel=True, position_bias="gaussian"),
        {"temperature": "sact", "lambda": 2.0, "sact_reading": "query", "sentinel": True, "position_bias": "gaussian"},
    ),
]
# attention.qk_norm: a tempered block scores the cosine of its unit queries and keys (the Transformer builds it so)
QK_NORM = [
    (BlockParts(score="dot", temperature="fixed", qk_norm=True), {"temperature": "fixed", "tau": 0.3, "qk_norm": True}),
    (
        BlockParts(score="dot", temperature="sact", qk_norm=True),
        {"temperature": "sact", "lambda": 6.0, "sact_reading": "query", "qk_norm": True},
    ),
    (
        BlockParts(score="dot", temperature="sact", qk_norm=True),
        {"temperature": "sact", "lambda": 6.0, "sact_reading": "first_pass", "qk_norm": True},
    ),
    (BlockParts(score="dot", temperature="learned", qk_norm=True), {"temperature": "learned", "qk_norm": True}),
    (
        BlockParts(score="dot", temperature="sact", sentinel=True, position_bias="gaussian", qk_norm=True),
        {
            "temperature": "sact",
            "sact_reading": "query",
            "sentinel": True,
            "position_bias": "gaussian",
            "qk_norm": True,
        },
    ),
]
MECHANISMS += QK_NORM


@pytest.mark.parametrize("parts,attention", MECHANISMS, ids=lambda p: str(p))
def test_each_head_mechanism_matches_its_formula(parts, attention):
    m = block(parts, **attention)
    cfg = transformer_config(**attention).attention
    torch.manual_seed(1)
    x, memory = torch.randn(2, 4, SIZE, dtype=torch.float64), torch.randn(2, 5, SIZE, dtype=torch.float64)
    real = [5, 3]
    key_mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    with torch.no_grad():
        out, trace, _ = m(x, *m.keys_values(memory), key_mask[:, None, None, :], key_mask)
        expected, taus, gates = oracle(m, x, memory, real, cfg)
    torch.testing.assert_close(out, expected)
    if parts.temperature != "none":
        torch.testing.assert_close(trace.tau, taus)
    if parts.sentinel:
        torch.testing.assert_close(trace.gate, gates)
        assert gates.max() < 0.999 and gates.std() > 0.05  # the slot takes part


def _batch():
    examples = [
        Example([5, 6, 7, 8, 9], [4, 5, 6, 7]),
        Example([10, 11, 12], [8, 9]),
        Example([13, 14, 15, 16], [10, 11, 12, 13, 14]),
    ]
    return make_batches(examples, 3)[0]


def model_of(model=None, **attention):
    cfg = transformer_config(model, **attention)
    torch.manual_seed(0)
    return build_model(cfg.model, cfg.attention, 20, 20).double().eval(), cfg


MODEL_VARIANTS = [
    {},
    {"temperature": "sact", "sact_reading": "query"},
    {"temperature": "sact", "sact_reading": "first_pass"},
    {"temperature": "sact", "sact_reading": "first_pass", "temperature_at": "both"},
    {"temperature": "sact", "sact_reading": "query", "temperature_at": "self"},
    {"temperature": "fixed", "tau": 2.0, "sentinel": True},
    {"position_bias": "gaussian", "position_layers": 1},
    {"score": "dot", "temperature": "sact", "sentinel": True},
    {"temperature": "learned", "temperature_at": "both", "sentinel": True},
    {"temperature": "sact", "sact_reading": "first_pass", "temperature_at": "both", "qk_norm": True},
    {"temperature": "fixed", "tau": 0.4, "sentinel": True, "qk_norm": True},
    {"temperature": "learned", "temperature_at": "self", "qk_norm": True},
    # the mechanisms after SACT (issue 72); the tempered reading carries c~_{t-1} from one decoding step to the next
    {"temperature": "sact", "sact_reading": "tempered", "sact_base": True, "temperature_at": "both", "qk_norm": True},
    {"temperature": "ssmax", "temperature_at": "both"},
    {"temperature": "selective", "temperature_at": "self"},
    {"normaliser": "entmax_learned", "softcap": True, "cap": 3.0, "temperature_at": "both"},
    {"temperature": "ssmax_fixed", "sentinel": True, "entropy_sharpening": True},
]


@pytest.mark.parametrize("attention", MODEL_VARIANTS, ids=str)
def test_teacher_forcing_equals_step_by_step_decoding(attention):
    """What training computes for every position at once is what decoding computes one cached step at a time."""
    model, _ = model_of(**attention)
    batch = _batch()
    logits, trace = model(batch.src, batch.src_lengths, batch.tgt_in)
    memory, state = model.encode(batch.src, batch.src_lengths)
    steps, taus = [], []
    for t in range(batch.tgt_in.size(1)):
        step_logits, state, out = model.decoder.step(batch.tgt_in[:, t], state, memory)
        steps.append(step_logits)
        taus.append(out.tau_heads)
    torch.testing.assert_close(torch.stack(steps, 1), logits)
    if trace.tau is not None:
        torch.testing.assert_close(torch.stack(taus, 1), trace.tau)
        assert trace.tau.size(-1) == len(model.head_labels())


def test_the_fused_path_gives_the_explicit_paths_loss_gradients_and_translations():
    """scaled_dot_product_attention where no mechanism is active, the spelled-out softmax elsewhere: one model."""
    fast, cfg = model_of()
    plain, _ = model_of({"fast_path": False})
    blocks = [(a, b) for a, b in zip(fast.modules(), plain.modules()) if isinstance(a, MultiHeadAttention)]
    assert sum(not a.parts.explicit() for a, _ in blocks) == 5 and all(b.parts.explicit() for _, b in blocks)
    batch = _batch()
    losses = []
    for model in (fast, plain):
        loss, _ = batch_loss(model, batch, cfg)
        loss.backward()
        losses.append(loss)
    torch.testing.assert_close(losses[0], losses[1])
    for (name, a), b in zip(fast.named_parameters(), plain.parameters()):
        torch.testing.assert_close(a.grad, b.grad, msg=name)
    for decode in (lambda m: greedy(m, batch, cfg.decode), lambda m: beam_search(m, batch, cfg.decode, 3)):
        assert [t.tokens for t in decode(fast)] == [t.tokens for t in decode(plain)]


@pytest.mark.parametrize("temperature_at", ["cross", "self", "both"])
def test_qk_norm_acts_in_the_tempered_blocks_only_and_they_match_the_formula(temperature_at):
    """The model with attention.qk_norm builds the blocks the temperature acts on as the oracle's cosine / tau (no
    1/sqrt(d_k)), and leaves every other block the scaled dot product of Vaswani et al."""
    attention = {"temperature": "sact", "sact_reading": "first_pass", "qk_norm": True, "temperature_at": temperature_at}
    model, cfg = model_of(**attention)
    torch.manual_seed(1)
    x, memory = torch.randn(2, 4, SIZE, dtype=torch.float64), torch.randn(2, 5, SIZE, dtype=torch.float64)
    key_mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    for layer in model.decoder.layers:
        for name, m in (("self", layer.self_attention), ("cross", layer.cross_attention)):
            tempered = temperature_at in (name, "both")
            assert (m.parts.qk_norm, m.parts.temperature) == ((True, "sact") if tempered else (False, "none"))
            if tempered:
                with torch.no_grad():
                    out, _, _ = m(x, *m.keys_values(memory), key_mask[:, None, None, :], key_mask)
                torch.testing.assert_close(out, oracle(m, x, memory, [5, 3], cfg.attention)[0])
    assert not any(layer.self_attention.parts.qk_norm for layer in model.encoder.layers)


def test_beam_search_of_width_one_is_greedy_search():
    model, cfg = model_of(temperature="sact", sentinel=True)
    batch = _batch()
    assert [t.tokens for t in beam_search(model, batch, cfg.decode, 1)] == [
        t.tokens for t in greedy(model, batch, cfg.decode)
    ]


def test_inverse_square_root_schedule_warms_up_to_the_rate_then_decays():
    cfg = tiny_config(train={"lr": 1e-3, "schedule": "inverse_sqrt", "warmup": 100})
    assert scheduled_lr(cfg, 1) == pytest.approx(1e-5)
    assert scheduled_lr(cfg, 50) == pytest.approx(5e-4)
    assert scheduled_lr(cfg, 100) == pytest.approx(1e-3)
    assert scheduled_lr(cfg, 400) == pytest.approx(5e-4)
    assert scheduled_lr(tiny_config(train={"lr": 1e-3}), 7) == 1e-3


@pytest.mark.parametrize(
    "overrides,message",
    [
        (
            ["model.arch=transformer", "attention.placement=bahdanau"],
            "attention.placement: must be luong (its default) with model.arch transformer: only the rnn reads it",
        ),
        (
            ["model.arch=transformer", "model.cell=gru"],
            "model.cell: must be lstm (its default) with model.arch transformer",
        ),
        (["model.arch=transformer", "attention.coverage=true"], "attention.coverage: must be False (its default)"),
        (["model.arch=transformer", "model.input_feeding=false"], "model.input_feeding: must be True (its default)"),
        (["model.heads=4"], "model.heads: must be 8 (its default) with model.arch rnn: only the transformer reads it"),
        (
            ["attention.sact_reading=query"],
            "attention.sact_reading: must be first_pass (its default) with model.arch rnn",
        ),
        (
            ["model.arch=transformer", "model.hidden_size=60", "model.emb_size=60"],
            "model.hidden_size: must be a multiple of model.heads (8)",
        ),
        (
            ["model.arch=transformer", "attention.sact_reading=previous"],
            "attention.sact_reading: must be one of query, first_pass, tempered (got 'previous')",
        ),
        (["model.arch=transformer", "train.schedule=inverse_sqrt", "train.lr_decay=0.5"], "train.lr_decay: must be 1"),
        (
            ["model.arch=transformer", "attention.score=concat"],
            "attention.score: must be one of dot, scaled_dot with model.arch transformer (the others have no part "
            "there) (got 'concat')",
        ),
        (
            ["attention.qk_norm=true", "attention.temperature=sact"],
            "attention.qk_norm: must be False (its default) with model.arch rnn: only the transformer reads it",
        ),
        (
            ["model.arch=transformer", "attention.qk_norm=true"],
            "attention.qk_norm: must be false with attention.temperature none (qk_norm scores the cosine",
        ),
        (
            ["model.arch=transformer", "attention.qk_norm=true", "attention.score=dot", "attention.temperature=fixed"],
            "attention.qk_norm: must be false with attention.score dot",
        ),
        (
            ["model.arch=transformer", "attention.position_bias=log"],
            "attention.position_bias: must be one of none, gaussian with model.arch transformer",
        ),
    ],
)
def test_a_key_the_architecture_does_not_read_is_one_line(overrides, message):
    with pytest.raises(ConfigError) as raised:
        build_config({"data": {"corpus": "synthetic"}}, parse_overrides(overrides))
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_nmt_train_answers_a_key_of_the_other_architecture_with_exit_2_and_writes_nothing(tmp_path):
    config = tmp_path / "trial.yaml"
    config.write_text(
        yaml.safe_dump(
            {"data": {"corpus": "synthetic"}, "model": {"arch": "transformer"}, "attention": {"coverage": True}}
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "nmt_core.cli", "train", str(config), "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"nmt: error: {config}: attention.coverage: must be False (its default) with "
        "model.arch transformer: only the rnn reads it (got True)"
    )
    assert not (tmp_path / "run").exists()


def test_the_transformer_reads_its_own_score_where_the_config_keeps_the_default():
    """general, the RNN's default (and what a checkpoint of an earlier version stored), is read as scaled_dot; the
    config and MLflow then say what ran, and the label says `transformer`."""
    from sweeper.space.spec import variant_label

    for attention in ({}, {"score": "general"}, {"score": "scaled_dot"}):
        cfg = build_config({"model": {"arch": "transformer"}, "attention": attention})
        assert cfg.attention.score == "scaled_dot" and cfg.active()["attention.score"] == "scaled_dot"
        assert variant_label(cfg) == "transformer+none"
    dot = build_config({"model": {"arch": "transformer"}, "attention": {"score": "dot", "temperature": "sact"}})
    assert variant_label(dot) == "transformer-dot+sact4-first_pass"
    qk = build_config({"model": {"arch": "transformer"}, "attention": {"temperature": "learned", "qk_norm": True}})
    assert variant_label(qk) == "transformer-qknorm+learned4" and qk.active()["attention.qk_norm"] is True
    assert build_config({}).attention.score == "general"  # the RNN's, unchanged


def test_the_rnn_takes_none_of_the_transformer_keys_and_stays_as_it_was():
    cfg = build_config({})
    assert cfg.model.arch == "rnn" and "model.heads" not in cfg.active() and "model.cell" in cfg.active()
    assert "model.cell" not in build_config({"model": {"arch": "transformer"}}).active()


def test_a_transformer_run_logs_the_sact_reading_only_with_sact():
    """The reading is SACT's own setting (like lambda): MLflow compares what acted."""

    def active(temperature: str) -> dict:
        return build_config({"model": {"arch": "transformer"}, "attention": {"temperature": temperature}}).active()

    assert active("sact")["attention.sact_reading"] == "first_pass"
    assert "attention.sact_reading" not in active("fixed") and "attention.sact_reading" not in active("none")
    assert "attention.sact_reading" not in build_config({"attention": {"temperature": "sact"}}).active()  # the RNN


@pytest.mark.parametrize("qk_norm", [False, True])
def test_diagnostics_count_every_head_of_every_word(qk_norm):
    """tau_* and the gate over (word, head) pairs of every tempered head; entropy and saturation over the last
    cross-attention's heads, not over their average. With qk_norm the same per-epoch tau_p50 and tau_at_bound."""
    model, cfg = model_of(temperature="sact", sentinel=True, qk_norm=qk_norm)
    batch = _batch()
    with torch.no_grad():
        _, trace = model(batch.src, batch.src_lengths, batch.tgt_in)
    words = batch.tgt_out != 0
    diagnostics = AttentionDiagnostics(cfg.attention)
    diagnostics.add(trace, batch.src != 0, words)
    report = diagnostics.report()
    tau = trace.tau[words].flatten()
    assert tau.numel() == int(words.sum()) * HEADS * 2
    lam = cfg.attention.lambda_
    assert report["tau_mean"] == pytest.approx(tau.mean().item())
    assert report["tau_at_bound"] == pytest.approx(((tau >= lam * 0.99) | (tau <= 1.01 / lam)).double().mean().item())
    assert report["sentinel_mean"] == pytest.approx(trace.gate[words].mean().item())
    heads = trace.head_weights[words]  # (N, heads, S)
    entropy = -(heads * heads.clamp_min(1e-30).log()).sum(-1)
    assert report["attn_entropy"] == pytest.approx(entropy.mean().item(), rel=1e-5)


@pytest.mark.slow
def test_train_resume_translate_and_trace_a_transformer(tmp_path):
    """`nmt train` for one epoch, resumed for a second, then translate and evaluate with per-head traces."""
    config = tmp_path / "trial.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "data": {"corpus": "synthetic", "train_subset": 400, "eval_subset": 20},
                "model": {
                    "arch": "transformer",
                    "emb_size": 32,
                    "hidden_size": 32,
                    "heads": 2,
                    "layers": 1,
                    "ff_size": 64,
                    "dropout": 0.0,
                    "tie_embeddings": True,
                },
                "attention": {"temperature": "sact", "lambda": 4, "sact_reading": "first_pass"},
                "train": {
                    "lr": 3e-3,
                    "batch_size": 32,
                    "epochs": 2,
                    "schedule": "inverse_sqrt",
                    "warmup": 10,
                    "label_smoothing": 0.1,
                    "device": "cpu",
                },
                "decode": {"beam_size": 3},
            }
        )
    )
    out = tmp_path / "run"

    def nmt(*args, stdin=None):
        return subprocess.run(
            [sys.executable, "-m", "nmt_core.cli", *args], input=stdin, capture_output=True, text=True
        )

    done = nmt("train", str(config), "--out", str(out), "--set", "train.epochs=1")
    assert done.returncode == 0, done.stderr
    done = nmt("train", str(config), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stderr and "epoch=2" in done.stderr and "tau_at_bound" in done.stderr
    done = nmt("translate", "--checkpoint", str(out), "--beam", "2", stdin="noun3 verb2 noun5\n\nadj1 noun4\n")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3
    (tmp_path / "src.txt").write_text("noun3 verb2 noun5\n")
    (tmp_path / "ref.txt").write_text("la NOUN3 la NOUN5 VERB2 ga\n")
    traces = tmp_path / "traces.parquet"
    done = nmt(
        "evaluate",
        "--checkpoint",
        str(out),
        "--src",
        str(tmp_path / "src.txt"),
        "--ref",
        str(tmp_path / "ref.txt"),
        "--traces",
        str(traces),
    )
    assert done.returncode == 0, done.stderr
    table = pq.read_table(traces)
    assert table.schema.metadata[b"tau_heads"] == b"l1.cross.h1,l1.cross.h2"
    rows = table.column("tau_heads").to_pylist()
    assert all(len(heads) == 2 and all(0.25 <= t <= 4 for t in heads) for heads in rows)

    # the MLflow model a sweep logs for it: loaded by mlflow.pyfunc, translating as `nmt translate` does
    import mlflow.pyfunc

    from nmt_core.mlflow_model import save_model

    save_model(torch.load(out / "last.pt", weights_only=True), tmp_path / "model", ["noun3 verb2 noun5"])
    model = mlflow.pyfunc.load_model(str(tmp_path / "model"))
    sources = ["noun3 verb2 noun5", "adj1 noun4 verb1 noun2"]
    for beam in (1, 3):
        done = nmt("translate", "--checkpoint", str(out), "--beam", str(beam), stdin="\n".join(sources) + "\n")
        assert model.predict(sources, params={"beam_size": beam}) == done.stdout.splitlines()


def test_a_space_grids_over_both_architectures_with_conditional_keys():
    """A key one architecture reads is validated where its `if:` puts it, and each trial gets only its own keys."""
    from sweeper.space.spec import parse_spec, plan_trials

    spec = parse_spec(
        yaml.safe_dump(
            {
                "name": "both",
                "data": {"corpus": "synthetic"},
                "base": {"model": {"emb_size": 32, "hidden_size": 32}},
                "parameters": {
                    "model.arch": {"grid": ["rnn", "transformer"]},
                    "model.heads": {"grid": [2, 4], "if": {"model.arch": ["transformer"]}},
                    "attention.placement": {"grid": ["luong", "bahdanau"], "if": {"model.arch": ["rnn"]}},
                },
                "search": {"algorithm": "grid"},
                "objective": {"metric": "bleu_dev", "mode": "max"},
            }
        ),
        "space.yaml",
    )
    configs = [plan.config(spec.base) for plan in plan_trials(spec)]
    assert sorted((c.model.arch, c.model.heads, c.attention.placement) for c in configs) == [
        ("rnn", 8, "bahdanau"),
        ("rnn", 8, "luong"),
        ("transformer", 2, "luong"),
        ("transformer", 4, "luong"),
    ]
