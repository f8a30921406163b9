"""Runner helpers: trial ids read back from trial folders, statuses, error lines, the GPU check (on a local Ray)."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from sweeper.running.runner import error_summary, trial_id_of, trial_status


@pytest.mark.parametrize(
    "folder, trial_id",
    [
        ("bbdbe_00011_general+sact8+sentinel_seed1", "bbdbe_00011"),  # grid / random
        ("8287bf51_general+sact4.62552_seed1", "8287bf51"),  # Optuna
        ("f369adcd_dot+none_seed3", "f369adcd"),
    ],
)
def test_trial_id_is_read_back_from_the_trial_folder(folder, trial_id):
    assert trial_id_of(Path("/storage/sweep") / folder) == trial_id


def test_trial_status_and_error_line():
    assert [
        trial_status("complete", True),
        trial_status("complete", False),
        trial_status("error", False),
        trial_status(None, False),
    ] == ["TERMINATED", "STOPPED", "ERROR", "UNFINISHED"]
    error = RuntimeError(
        "ray::ImplicitFunc.train() (pid=1, ip=127.0.0.1)\n  File x\n\x1b[36mTrainingDiverged: epoch 1\x1b[0m"
    )
    assert error_summary(error) == "TrainingDiverged: epoch 1"


class PausingController:
    """Tune 2.60's own pause and stop code (TuneController's methods, unbound) over just the state they read: the
    trial-to-actor map and the decisions cached while a trial saves. No Ray, no actors."""

    from ray.tune.execution.tune_controller import TuneController

    pause_trial = TuneController.pause_trial
    _schedule_trial_pause = TuneController._schedule_trial_pause
    _schedule_trial_stop = TuneController._schedule_trial_stop
    search_alg = None

    def __init__(self, trials):
        self._cached_trial_decisions = {}
        self._trial_to_actor = {trial: object() for trial in trials}
        self._actor_manager = SimpleNamespace(clear_actor_task_futures=lambda tracked_actor: None)

    def _set_trial_status(self, trial, status):
        trial.set_status(status)

    def _mark_trial_to_checkpoint(self, trial):
        pass

    def _maybe_cache_trial_actor(self, trial):
        return True  # reuse_actors: the actor is kept, the trial leaves it

    def get_trials(self):
        return list(self._trial_to_actor)


def test_a_trial_exploited_while_its_pause_checkpoint_saves_is_not_stopped_after_its_next_epoch(tmp_path, monkeypatch):
    """CI once printed "3/4 trials finished, 1 stopped early" for a 4-trial synchronous PBT sweep: the bottom
    trial, exploited while its PAUSE save was in flight, trained one epoch from its donor's checkpoint and was then
    completed without its final report. Tune left a STOP cached for it (the stale decision its next save pops);
    the sweep's PBT drops it. Mutation: PopulationBasedTraining instead of the sweep's (the cached STOP stays)."""
    from ray.tune.experiment import Trial
    from ray.tune.schedulers import TrialScheduler

    from sweeper.running.runner import build_tune_config
    from tests.unit.test_space import spec_of

    spec = spec_of(**{"scheduler": {"type": "pbt", "synch": True, "mutations": {"train.lr": [1e-4, 1e-3, 1e-2]}}})
    pbt = build_tune_config(spec, spec.base)[0].scheduler
    pbt.set_search_properties("bleu_dev", "max")
    monkeypatch.setattr(Trial, "local_experiment_path", property(lambda trial: str(tmp_path)))  # PBT's policy log
    bottom, top = (Trial("run_trial", config={"trial": {"params": {"train.lr": lr}}}, stub=True) for lr in (1e-4, 1e-2))
    controller = PausingController([bottom, top])
    for trial, score in ((bottom, 0.1), (top, 12.0)):
        pbt.on_trial_add(controller, trial)
        trial.set_status(Trial.RUNNING)
        pbt._trial_state[trial].last_score = score
    bottom.temporary_state.saving_to = object()  # what pause_trial(should_checkpoint=True) left: a save in flight
    controller._cached_trial_decisions[bottom.trial_id] = TrialScheduler.PAUSE

    pbt._exploit(controller, bottom, top)

    assert bottom.status == Trial.PAUSED and not bottom.is_saving  # it restarts from the donor's checkpoint
    assert bottom.trial_id not in controller._cached_trial_decisions  # no STOP left for its next save to pop


def test_pbt_mutates_the_planned_params_and_gives_each_trial_an_initial_value():
    from ray.tune.schedulers import HyperBandScheduler, PopulationBasedTraining

    from sweeper.running.runner import build_tune_config
    from tests.unit.test_space import spec_of

    spec = spec_of(
        **{
            "scheduler": {
                "type": "pbt",
                "synch": True,
                "mutations": {"train.lr": {"loguniform": [1e-4, 1e-2]}, "train.label_smoothing": [0.0, 0.1, 0.2]},
            }
        }
    )
    config, space = build_tune_config(spec, spec.base)
    assert isinstance(config.scheduler, PopulationBasedTraining) and config.scheduler._synch  # the spec's synch
    trials = space["trial"]["grid_search"]
    assert all(
        1e-4 <= t["params"]["train.lr"] <= 1e-2 and t["params"]["train.label_smoothing"] in (0.0, 0.1, 0.2)
        for t in trials
    )
    assert len({t["params"]["train.lr"] for t in trials}) == len(trials)  # a population, not clones
    assert build_tune_config(spec, spec.base)[1] == space  # seeded: the same plan twice
    explored = config.scheduler._custom_explore_fn(
        {"trial": {"params": {"train.lr": 0.05, "train.label_smoothing": 0.1}}}
    )
    assert explored["trial"]["params"]["train.lr"] == 1e-2  # clamped back into its range after a * 1.2
    hyperband, _ = build_tune_config(spec_of(**{"scheduler": {"type": "hyperband"}}), spec.base)
    assert isinstance(hyperband.scheduler, HyperBandScheduler)


def test_a_cold_autoscaling_cluster_waits_for_gpu_nodes_and_a_fixed_one_is_refused(tmp_path, capsys):
    """The autoscaler reports its node types to the GCS (the cluster config Ray Data also reads): a cluster with 0
    GPUs now whose node types have GPUs starts the sweep and says it waits; without such node types, exit-2 error."""
    import ray
    from ray._raylet import GCS_AUTOSCALER_CLUSTER_CONFIG_KEY, GCS_AUTOSCALER_STATE_NAMESPACE
    from ray.core.generated.autoscaler_pb2 import ClusterConfig, NodeGroupConfig
    from ray.experimental.internal_kv import _internal_kv_put

    from sweeper.running.runner import check_gpus
    from sweeper.space.spec import SpecError, load_spec

    space = tmp_path / "gpu.yaml"
    space.write_text("name: gpu\ndata: {corpus: synthetic}\nresources: {cpu: 1, gpu: 0.5}\n")
    spec = load_spec(str(space), {})
    ray.shutdown()  # a Ray an earlier test left in this process would be reused, with its own GPUs
    ray.init(num_cpus=1, num_gpus=0, include_dashboard=False, configure_logging=False)
    try:
        with pytest.raises(SpecError, match="has 0 GPUs and no autoscaler node type with GPUs"):
            check_gpus(spec)
        config = ClusterConfig(
            node_group_configs=[
                NodeGroupConfig(name="head", resources={"CPU": 0}, min_count=1, max_count=1),
                NodeGroupConfig(name="gpu-worker", resources={"CPU": 4, "GPU": 1}, min_count=0, max_count=4),
            ]
        )
        _internal_kv_put(
            GCS_AUTOSCALER_CLUSTER_CONFIG_KEY, config.SerializeToString(), namespace=GCS_AUTOSCALER_STATE_NAMESPACE
        )
        check_gpus(spec)
        assert "has 0 GPUs now; its autoscaler can add up to 4: trials wait for GPU nodes" in capsys.readouterr().out
    finally:
        ray.shutdown()
