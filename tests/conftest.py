"""Shared fixtures (tiny configurations that train in seconds on a CPU, the session's MLflow server) and how the
suite runs in parallel.

CI runs `pytest -n 2` (pytest-xdist, one worker per core, `--dist loadgroup` in pyproject.toml): a worker takes one
test at a time, except that the tests of one xdist group run one after another on one worker. In parallel the slow
(end-to-end) groups go first, then the other slow tests, then the rest, which fill in around them; in one process
the cheap tests go first.

- A test that trains a model only to read what training writes (its checkpoint, logged model, metrics) trains on
  FEW_PAIRS, not on TINY's whole synthetic corpus.
- A test that reads a finished sweep asks for a shared sweep fixture (tests/e2e/conftest.py: `tracked_sweep`, or a
  new one there) instead of running its own sweep: `pytest_collection_modifyitems` below puts it in the fixture's
  xdist group, so the sweep runs once, on one worker.
- Every session or module fixture defined under tests/ does the same (a module's Ray head or cluster starts once),
  except those in PER_WORKER, which each worker starts for itself because they are cheap and widely used.
- `@pytest.mark.xdist_group("name")` puts tests on one worker by hand; it is never needed for isolation: every test
  names its own stores, ports (port 0, or tests.servers.quiet_ports) and Ray temp folders, and touches only its own
  processes.
- The tests that compile with Inductor share one group (`COMPILES`): one after another on one worker, each reuses
  the kernels the earlier ones left in Inductor's on-disk cache; two workers compiling at once both compile them
  cold: these 12 tests alone on a fresh machine, 365 s of CPU in one process, 491 s on two workers.
- Waits end on an event, never at a deadline of their own (tests.servers.wait_until); pytest-timeout bounds them.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

from nmt_core.config import TrialConfig, build_config
from nmt_core.gates.gate import network_environment

TINY = {
    "data": {"corpus": "synthetic"},
    "model": {"emb_size": 16, "hidden_size": 16, "dropout": 0.0},
    "train": {"lr": 3e-3, "batch_size": 16, "epochs": 1, "seed": 1},
    "decode": {"beam_size": 3},
}
# the data of a test that trains a model to read what training writes (its metrics, checkpoint, logged model), not
# how well it learned: TINY's whole synthetic corpus (4,000 pairs, 200 dev and test) costs such a test 6 s of CPU an
# epoch, these pairs a tenth of it
FEW_PAIRS = {"train_subset": 320, "eval_subset": 20}

# every test names its own stores: an MLflow server or Ray cluster a developer exported must not receive test runs
for _name in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS"):
    os.environ.pop(_name, None)
# tiny models: threads cost more than they give, in every process the tests start (nmt, sweeper, Ray's workers) as in
# this one (_single_thread); idle OpenMP threads spin, and beside a second xdist worker they spin on its core
os.environ.setdefault("OMP_NUM_THREADS", "1")
# a test's Ray head may bring up its job agent slowly on a loaded machine: submit waits 10 min for it (one line after)
os.environ.setdefault("NMT_SWEEPER_AGENT_WAIT", "600")


COMPILES = pytest.mark.xdist_group("inductor")  # see the module's docstring


def tiny_config(**sections) -> TrialConfig:
    """TINY with some sections' keys replaced, e.g. tiny_config(attention={"temperature": "sact"})."""
    raw = {name: dict(values) for name, values in TINY.items()}
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    return build_config(raw)


MLFLOW_URI_HOLDERS = {
    "mlflow.tracking._tracking_service.utils": "_tracking_uri",
    "mlflow.tracking._model_registry.utils": "_registry_uri",
}


# what a command run in the test's process exports for the rest of its process: the store MLflow's calls go to, and
# the network settings configure_network sets where unset (a value already set wins, so a later test's shorter
# NMT_SWEEPER_TIMEOUT would find the first command's 10 s in libpq's and MLflow's timeouts)
PROCESS_SETTINGS = ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI", *network_environment())


@pytest.fixture(autouse=True)
def _mlflow_store_put_back():
    """A test that points MLflow's process-wide store somewhere (mlflow.set_tracking_uri also exports
    $MLFLOW_TRACKING_URI, which every command reads first) must not send the next test's sweeps there, nor leave it
    the network settings its commands exported."""
    variables = {name: os.environ.get(name) for name in PROCESS_SETTINGS}
    saved = {
        module: getattr(sys.modules[module], name, None) if module in sys.modules else None
        for module, name in MLFLOW_URI_HOLDERS.items()
    }
    yield
    for module, name in MLFLOW_URI_HOLDERS.items():
        if module in sys.modules:
            setattr(sys.modules[module], name, saved[module])
    for name, value in variables.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def _artifact_gate_put_back():
    """The artifact-location gate is a process's (nmt_core/gates/artifact_locations.py: a command opens its store,
    which installs the gate and trusts that store, once): a store one test opened in this process must not judge the
    next test's artifact locations, nor keep the credentials from the next test's server."""
    from mlflow.store.artifact import artifact_repository_registry as registry

    from nmt_core.gates import artifact_locations

    stores = list(artifact_locations._stores)
    door = registry.ArtifactRepositoryRegistry.get_artifact_repository
    schemes = dict(registry._artifact_repository_registry._registry)
    yield
    artifact_locations._stores[:] = stores
    registry.ArtifactRepositoryRegistry.get_artifact_repository = door
    registry._artifact_repository_registry._registry.clear()
    registry._artifact_repository_registry._registry.update(schemes)


@pytest.fixture(autouse=True)
def _single_thread():
    torch.set_num_threads(1)  # tiny models: threads cost more than they give, and results stay stable


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    from tests.servers import MlflowServer

    server = MlflowServer(tmp_path_factory.mktemp("mlflow"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def worker_ray(tmp_path_factory):
    """A one-machine Ray cluster (a head with this machine's CPUs, like the local Ray `sweeper run` starts) that the
    sweeps of tests about something else join with `--address` and its `env` (its token): a local Ray started and
    stopped for each sweep costs about 5 s of CPU (GCS, raylet, dashboard, agents, monitor), a fifth of a tiny sweep's.
    The tests of the local Ray itself (tests/e2e/test_local_ray.py, a local sweep stopped by name, a driver's local
    Ray ended by a signal, secrets kept out of what a sweep stores) start their own."""
    from tests.servers import RayCluster

    cluster = RayCluster(tmp_path_factory.mktemp("worker-ray"), workers=0, head_cpus=os.cpu_count() or 1)
    yield cluster
    cluster.stop()


PER_WORKER = {"mlflow_server", "worker_ray"}  # shared fixtures that each xdist worker may start for itself


def shared_fixture_groups(item: pytest.Item) -> set[str]:
    """The xdist groups of a test: one per session fixture of the tests (its name) and one for its module's module
    fixtures (the module's name) that it uses, PER_WORKER aside."""
    groups = set()
    for name in item.fixturenames:
        definitions = item._fixtureinfo.name2fixturedefs.get(name)
        if not definitions or name in PER_WORKER:
            continue
        definition = definitions[-1]
        if not definition.func.__module__.startswith("tests."):
            continue  # pytest's own (tmp_path_factory, ...)
        if definition.scope == "session":
            groups.add(name)
        elif definition.scope in ("package", "module"):
            groups.add(item.module.__name__)
    return groups


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests sharing a fixture go to one xdist worker. In parallel, the longest work first (slow groups, then slow
    tests, then the rest: the short tests fill in around the long ones); in one process, the cheap tests first.
    The sort is stable: the collection order stays within each kind."""
    for item in items:
        for group in sorted(shared_fixture_groups(item)):
            item.add_marker(pytest.mark.xdist_group(group))
    parallel = hasattr(config, "workerinput")  # this process is an xdist worker

    def order(item: pytest.Item) -> tuple[bool, ...]:
        slow = item.get_closest_marker("slow") is not None
        return (not slow, item.get_closest_marker("xdist_group") is None) if parallel else (slow,)

    items.sort(key=order)
