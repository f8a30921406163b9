"""Running sweeps on Ray: the Tuner (search, schedulers, resources, retries, resume), the trainable every trial runs,
the driver's lock, console and progress, Optuna's study, sweeps by name, Ray Jobs submission and the cluster's
dashboard, a trial's artifacts and models. The top layer below the commands (sweeper.api, sweeper.cli): may import
every layer beneath it (summary, tracking, storage, space, design, nmt_core)."""
