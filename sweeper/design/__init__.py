"""Group-sequential design mathematics for studies that settle: the numbers behind adding seeds in blocks ("looks")
and stopping once a comparison of training variants is decided, with the overall type I error held at alpha.

At each look the seed-and-sentence test's t statistic is compared with a boundary; the boundaries come from an
error-spending function (Lan & DeMets 1983) and the canonical joint distribution of the looks' statistics
(Jennison & Turnbull 2000, "Group Sequential Methods with Applications to Clinical Trials", ch. 3, 7 and 19).

- spending: alpha (and beta) spending functions of the information fraction t.
- integration: the density of the standardised statistic carried from look to look (J&T ch. 19).
- boundaries: efficacy bounds from a spending function, constant (Pocock, O'Brien-Fleming) bounds, crossing and
  stopping probabilities under a drift.
- futility: non-binding futility bounds by beta spending, and the drift that gives the planned power.
- designs: a Design (bounds, alpha spent, nominal p-values, inflation factor) for superiority and for equivalence
  (two one-sided group-sequential tests), and its stopping probabilities.
- sample_size: seeds a row, fixed and group-sequential, expected seeds to a decision, and their range over the
  uncertainty of the seed variance.
- repeated_ci: repeated confidence intervals (J&T ch. 9), with the t quantile at each look's nominal level.

Pure numbers: numpy and scipy only. Nothing here imports the rest of the project, so it can be read, tested and
reused without Ray, MLflow or torch.
"""
