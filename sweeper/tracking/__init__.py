"""MLflow: the tracking store checked before use, a parent run per sweep and a child run per trial, the names of
every metric, tag and run, the saved views that open the sweep in MLflow's UI and their charts, tables, provenance,
system metrics and the outage backlog. May import storage, the space and nmt_core; never the summary or running.
Importing this package loads nothing: its modules are imported by name (runs.py imports Ray Tune, store.py does
not)."""
