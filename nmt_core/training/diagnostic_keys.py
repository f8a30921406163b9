"""The names and thresholds of the attention diagnostics (nmt_core.training.diagnostics): what an epoch's report,
MLflow and results.parquet call each number, and the cut-offs that define "saturated", "at a bound" and
"collapsed". Torch-free and apart from the computation, so that the sweeper's driver, its tracking and its summary
read these names without importing torch and the model."""

from __future__ import annotations

from nmt_core.family.registry import observed_names

SATURATED_WEIGHT = 0.95  # a step is saturated when one source word takes more than this
BOUND_TOLERANCE = 0.01  # tau within 1% of 1/lambda or lambda counts as "at a bound"
COLLAPSED_GATE = 0.01  # a sentinel gate below this means "attend to the source as usual"

# what `report` returns; the epoch report, MLflow and results.parquet use these names
SCORE_RANGE, ENTROPY, SATURATED = "attn_score_range", "attn_entropy", "attn_saturated"
TAU_P5, TAU_P50, TAU_P95, TAU_AT_BOUND = "tau_p5", "tau_p50", "tau_p95", "tau_at_bound"
TAU_MEAN, TAU_STD = "tau_mean", "tau_std"
GATE_MEAN, GATE_COLLAPSED = "sentinel_mean", "sentinel_collapsed"
OBSERVED = observed_names()  # what the parts observe per token (capped, zeros, alpha, log_n_scale, tau_modulation)
STATISTICS = ("mean", "p5", "p50", "p95")  # of each observed value over the epoch's dev tokens: `<name>_<statistic>`
MODULATION = "tau_modulation"  # lambda^beta, tau without its base scale: what lies in (1/lambda, lambda)
KEYS = (
    SCORE_RANGE,
    ENTROPY,
    SATURATED,
    TAU_MEAN,
    TAU_STD,
    TAU_P5,
    TAU_P50,
    TAU_P95,
    TAU_AT_BOUND,
    GATE_MEAN,
    GATE_COLLAPSED,
    *(f"{name}_{statistic}" for name in OBSERVED for statistic in STATISTICS),
)
