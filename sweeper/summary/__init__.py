"""The papers' tables and figures from a finished sweep, read back from MLflow (never from trial memory).

- The verdict first (headline): a line per comparison, the variants in columns, the warnings a line each; the
  same lines head summary.md, the parent run's description and the console's end.
- Findings first: mechanisms that degenerated (saturated attention, tau at a bound, a collapsed gate), dev
  curves still rising, SACT lambdas without a fixed-tau control (sweeper.summary.checks).
- BLEU table (SACT Tables 1-2, Li & Zhu Table 1): a row per variant (seeds grouped), mean +- sample std,
  the paper-comparable multi-bleu, #params, time per epoch, delta to the baseline and each SACT lambda's delta to
  its fixed tau = lambda control, each with a 95% bootstrap interval and a two-sided seed-averaged paired test
  (bootstrap or approximate randomization), Holm-corrected over all of them (** / * better, †† / † worse), and
  what the sweep shows, each claim naming what it was tested against.
- Test BLEU a dot per seed, fixed-tau curve (SACT Figure 1), temperature heatmaps (Figure 2), sentinel words (Li &
  Zhu Table 2), and tau / gate by word class, teacher-forced on the references of every seed (word_classes).
- translations.html (translations_page): each variant's test translations side by side, with sentence chrF.

By job: records (a sweep's trials, then the artifacts of those kept, into a SweepSnapshot) -> combine (sweeps
joined by --with) and choose (each row's --choose value on dev) -> statistics -> findings -> tables (pure renderers),
headline and figures (data, then drawing) -> report (orchestration and write-back to the parent run). `plots` draws
every figure the sweeper makes, a trial's heatmaps too. May import tracking, storage, the space, sweeper.design and
nmt_core; never running or the commands.
"""

from sweeper.summary.records import SummaryError, SweepSnapshot, TrialRecord, read_artifacts, read_trials
from sweeper.summary.report import summarize, summarize_data, write_report
from sweeper.summary.statistics import Summary, VariantRow, alignment_table, build_summary, mean_std
from sweeper.summary.tables import planning_lines, render_alignment, render_csv, render_latex, render_markdown

__all__ = [
    "Summary",
    "SummaryError",
    "SweepSnapshot",
    "TrialRecord",
    "VariantRow",
    "alignment_table",
    "build_summary",
    "mean_std",
    "planning_lines",
    "read_artifacts",
    "read_trials",
    "render_alignment",
    "render_csv",
    "render_latex",
    "render_markdown",
    "summarize",
    "summarize_data",
    "write_report",
]
