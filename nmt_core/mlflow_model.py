"""A trained model as an MLflow model: a pyfunc that translates, saved by every finished trial.

Saved with MLflow's own `mlflow.pyfunc.save_model`, so the folder has what MLflow's tools read: a signature
(one string column in, one out, and `beam_size` as a parameter: `predict(lines, params={"beam_size": 2})`),
an input example (the trial's first dev sentences), and requirements that pin this package and its
decoding stack to the versions that trained the model. The flavour is a `loader_module` (this module) with
the best-dev weights as its data, not a `PythonModel`: nothing is pickled (a PythonModel's class is
cloudpickled, tying the model to this Python's pickle of it), and loading is the same
`checkpoint.load_for_inference` that `nmt translate --checkpoint` uses.

The trial only saves the folder; the sweep's driver logs it as an MLflow 3 LoggedModel of the trial's run
(sweeper/tracking/runs.py), as the single writer to the tracking store.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from nmt_core.config import ConfigError
from nmt_core.gates import artifact_locations
from nmt_core.gates.credentials import decoded, redact
from nmt_core.gates.gate import check_text, clip
from nmt_core.gates.network import configure_network
from nmt_core.gates.sqlite_stores import check_store
from nmt_core.gates.tracking_store import choose_tracking_uri, mlflow_store, probe_store, schema_head
from nmt_core.training import checkpoint

REQUIREMENTS = ("nmt-sweeper", "torch", "sacrebleu", "sentencepiece")  # what decoding imports (MLflow adds itself)
BEAM = "beam_size"  # the predict-time parameter


class Translator:
    """What `mlflow.pyfunc.load_model` returns the predictions of: source lines in, translations out."""

    def __init__(self, path: str):
        self.loaded = checkpoint.load_for_inference(path)

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> list[str]:
        """A list of source lines, or a DataFrame whose first column holds them; `params["beam_size"]`
        (the signature's default: the trial's decode.beam_size)."""
        from nmt_core.training.inference import check_beam_size, check_sentences, translate_lines

        lines = list(model_input.iloc[:, 0]) if hasattr(model_input, "iloc") else list(model_input)
        lines = [str(line) for line in lines]
        check_sentences(lines, "model_input", "predict")
        beam = (params or {}).get(BEAM, self.loaded.config.decode.beam_size)
        with contextlib.suppress(TypeError):
            beam = operator.index(beam)  # MLflow's `long` may arrive as a NumPy integer
        return translate_lines(lines, self.loaded, check_beam_size(beam, f"params: {BEAM}", "predict"))[0]


def _load_pyfunc(data_path: str) -> Translator:
    """MLflow's pyfunc loader protocol (`loader_module`): `data_path` is the model's best.pt."""
    return Translator(data_path)


def best_model_state(state: dict[str, Any]) -> dict[str, Any]:
    """What translation needs from a training state: the best-dev weights, config, vocabularies, subwords."""
    return {
        "format": checkpoint.FORMAT,
        "model": state["best_model"],
        "config": state["config"],
        "vocab": state["vocab"],
        "subword": state.get("subword", {}),
        "epoch": state["best_epoch"],
    }


def requirements() -> list[str]:
    """This package and its decoding stack pinned to the running versions (local labels such as +cpu dropped:
    the same model runs on a CUDA build)."""
    return [f"{name}=={metadata.version(name).split('+')[0]}" for name in REQUIREMENTS]


def save_model(state: dict[str, Any], out: Path, example: list[str]) -> None:
    """Write the MLflow model folder `out` from a training state with `mlflow.pyfunc.save_model`."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    import mlflow.pyfunc
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema

    beam = int(state["config"]["decode"]["beam_size"])
    signature = ModelSignature(
        inputs=Schema([ColSpec("string")]),
        outputs=Schema([ColSpec("string")]),
        params=ParamSchema([ParamSpec(BEAM, "long", beam)]),
    )
    logging.getLogger("mlflow.pyfunc").setLevel(logging.WARNING)  # not a line per trial: "Validating input example"
    with tempfile.TemporaryDirectory() as folder:
        weights = Path(folder) / checkpoint.BEST
        checkpoint.save(best_model_state(state), weights)
        mlflow.pyfunc.save_model(
            str(out),
            loader_module=__name__,
            data_path=str(weights),
            signature=signature,
            input_example=example,
            pip_requirements=requirements(),
        )


RUN_ID_CHARS = 64
MODEL_URI_CHARS = 100_000  # a registered model's name has no bound of its own here; the line shows 100 characters


def model_location(uri: Any) -> str:
    """`uri` as MLflow is given it, once it is one of the model URIs `nmt translate --model` takes: `runs:/<run
    id>/<path>` with a path that stays below the run's artifacts, `models:/<name>/<version>` or
    `models:/<name>@<alias>`. Each part is percent-decoded before it is looked at, so `%2e%2e` is a `..` too; a
    `..`, an empty part or an encoded '/' is refused, not resolved."""
    check_text(uri, "--model", "nmt translate", ConfigError, limit=MODEL_URI_CHARS)
    scheme, separator, rest = uri.partition(":/")
    parts = [decoded(part) for part in rest.split("/")]
    if scheme not in ("runs", "models") or not separator or not parts[0]:
        raise ModelUriError(uri, None, "expected models:/<name>/<version>, models:/<name>@<alias> or runs:/<id>/model")
    if any(part in ("", ".", "..") or "/" in part or "\\" in part for part in parts):
        raise ModelUriError(uri, None, "a model URI's parts are names: no '..', '.', empty part or encoded '/'")
    if scheme == "runs":
        run_id = parts[0]
        if len(run_id) > RUN_ID_CHARS or not run_id.replace("-", "").replace("_", "").isalnum() or len(parts) < 2:
            raise ModelUriError(uri, None, "expected runs:/<run id>/<artifact path>, a run id of letters and digits")
    elif len(parts) > 2 or (len(parts) == 2 and not (parts[1].isdigit() or parts[1] == "latest")):
        raise ModelUriError(uri, None, "expected models:/<name>/<version> or models:/<name>@<alias>")
    return f"{scheme}:/" + "/".join(parts)


@contextmanager
def downloaded_model(uri: str, tracking_uri: str | None) -> Iterator[Path]:
    """best.pt of a model URI (see model_location), in a temporary folder that is removed when the block ends.

    Raises ModelUriError (one line) when the URI or the store cannot give a model.
    """
    store = choose_tracking_uri(tracking_uri)
    location = model_location(uri)
    if store.startswith("sqlite:///") and not Path(store.removeprefix("sqlite:///")).exists():
        raise ModelUriError(
            uri, store, "no tracking store there (pass --tracking-uri, or run from the folder holding mlflow.db)"
        )
    check_store(store, False, "--tracking-uri", schema_head)  # an MLflow store, never another database made one
    if location.startswith("models:/") and (store.startswith("file:") or "://" not in store):
        raise ModelUriError(
            uri,
            store,
            "a file store has no model registry in MLflow 3; models are registered in a "
            "database store (sqlite:///mlflow.db) or an MLflow server; runs:/<id>/model still works",
        )
    probe_store(store, "--tracking-uri")
    configure_network()
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # a bar per file is noise
    import mlflow
    from mlflow.exceptions import MlflowException

    with tempfile.TemporaryDirectory(prefix="nmt-model-") as destination, artifact_locations.refusals() as refused:
        try:
            with mlflow_store(store):  # models:/ URIs resolve through the registry, which does not follow tracking_uri
                source = run_model(location, store)
                mlflow.artifacts.download_artifacts(artifact_uri=source, tracking_uri=store, dst_path=destination)
        except ConfigError:
            raise
        except MlflowException as err:
            if refused:  # MLflow's runs:/ download swallows why it failed: the location's refusal says it
                raise refused[0] from None
            raise ModelUriError(uri, store, clip(err.message.strip().splitlines()[0], 200)) from None
        except Exception as err:  # noqa: BLE001 - the store's driver failing (a database gone): one line, not its trace
            raise ModelUriError(uri, store, f"the store failed ({type(err).__name__}: {clip(str(err), 120)})") from None
        if refused:
            raise refused[0]
        yield _checkpoint_in(Path(destination), uri, store)


def run_model(location: str, store: str) -> str:
    """`runs:/<id>/model` of a run whose one LoggedModel has another name (a sweep names each after its variant,
    e.g. `SACT-lambda4`) as `models:/<that model's id>`: MLflow finds a run's model by its name only. Any other
    location as it is."""
    run_id, _, path = location.removeprefix("runs:/").partition("/")
    if not location.startswith("runs:/") or path != "model":
        return location
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store)
    experiment = client.get_run(run_id).info.experiment_id
    models = client.search_logged_models([experiment], filter_string=f"source_run_id = '{run_id}'", max_results=2)
    if len(models) == 1 and models[0].name != path:
        return f"models:/{models[0].model_id}"
    return location


def _checkpoint_in(folder: Path, uri: str, store: str) -> Path:
    """The one best.pt the download holds: a regular file below `folder`, with no link anywhere in the download."""
    found = []
    for root, folders, files in os.walk(folder):
        for name in folders + files:
            if os.path.islink(os.path.join(root, name)):
                raise ModelUriError(uri, store, "the artifact holds a link; a model is plain files")
        found += [Path(root) / name for name in files if name == checkpoint.BEST]
    if not found:
        raise ModelUriError(uri, store, "this artifact is not an nmt model (no best.pt in it)")
    return found[0]


class ModelUriError(checkpoint.CheckpointError):
    def __init__(self, uri: str, store: str | None, why: str):
        where = f" (tracking store {redact(store)})" if store else ""
        super().__init__(f"--model {clip(uri)}: {why}{where}")
