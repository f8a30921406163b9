"""The sweep service: YAML search spaces as Ray Tune experiments, tracked in MLflow, summarised for papers."""
