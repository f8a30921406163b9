"""Data and corpora for one trial: corpora by name (registry packages, folders, the synthetic pair) prepared once
into a Parquet cache, word alignments, tokenising, vocabularies and length-bucketed batches. May import the config,
the gates and the models' special token ids; never training."""
