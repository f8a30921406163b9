"""A trained model as an MLflow model: a pyfunc that translates, saved by every finished trial.

Saved with MLflow's own `mlflow.pyfunc.save_model`, so the folder has what MLflow's tools read: a signature
(one string column in, one out, and `beam_size` as a parameter: `predict(lines, params={"beam_size": 2})`),
an input example (the trial's first dev sentences), and requirements that pin this package and its
decoding stack to the versions that trained the model. The flavour is a `loader_module` (this module) with
the best-dev weights as its data, not a `PythonModel`: nothing is pickled (a PythonModel's class is
cloudpickled, tying the model to this Python's pickle of it), and loading is the same
`checkpoint.load_for_inference` that `nmt translate --checkpoint` uses.

The trial only saves the folder; the sweep's driver logs it as an MLflow 3 LoggedModel of the trial's run
(sweeper/tracking.py), as the single writer to the tracking store.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from nmt_core import checkpoint
from nmt_core.credentials import check_uri, redact

DEFAULT_TRACKING = "sqlite:///mlflow.db"  # the sweeper's default store, in the working folder
REQUIREMENTS = ("nmt-sweeper", "torch", "sacrebleu", "sentencepiece")  # what decoding imports (MLflow adds itself)
BEAM = "beam_size"  # the predict-time parameter


def choose_tracking_uri(flag: str | None, configured: str | None = None) -> str:
    """The one order every command follows, MLflow's own convention first: `--tracking-uri`, else
    $MLFLOW_TRACKING_URI, else what the space says (or what a sweep recorded), else DEFAULT_TRACKING; a URI that
    carries a credential is refused wherever it came from."""
    environment = os.environ.get("MLFLOW_TRACKING_URI")
    uri = flag or environment or configured or DEFAULT_TRACKING
    source = "--tracking-uri" if flag else "MLFLOW_TRACKING_URI" if environment else "tracking.uri"
    return check_uri(uri, "tracking", "tracking.uri", source)


class Translator:
    """What `mlflow.pyfunc.load_model` returns the predictions of: source lines in, translations out."""

    def __init__(self, path: str):
        self.loaded = checkpoint.load_for_inference(path)

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> list[str]:
        """A list of source lines, or a DataFrame whose first column holds them; `params["beam_size"]`
        (the signature's default: the trial's decode.beam_size)."""
        from nmt_core.inference import translate_lines

        lines = list(model_input.iloc[:, 0]) if hasattr(model_input, "iloc") else list(model_input)
        beam = int((params or {}).get(BEAM, self.loaded.config.decode.beam_size))
        if beam < 1:
            raise ValueError(f"params: {BEAM}: must be >= 1 (got {beam})")
        return translate_lines([str(line) for line in lines], self.loaded, beam)[0]


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


@contextmanager
def mlflow_store(uri: str) -> Iterator[None]:
    """MLflow's process-wide tracking and registry URIs set to `uri` for the calls that read them, then put back.

    mlflow.set_tracking_uri and set_registry_uri also export $MLFLOW_TRACKING_URI and $MLFLOW_REGISTRY_URI. Left
    set, they would outlive the call and, $MLFLOW_TRACKING_URI being what every command reads before a space's
    tracking.uri, send this process's next sweep (a notebook's second `sweeper.run`) and the processes it starts
    to this store."""
    import mlflow
    from mlflow.tracking._model_registry import utils as registry
    from mlflow.tracking._tracking_service import utils as tracking

    saved = tracking._tracking_uri, registry._registry_uri
    variables = {name: os.environ.get(name) for name in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")}
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        yield
    finally:
        tracking._tracking_uri, registry._registry_uri = saved
        for name, value in variables.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def download_model(uri: str, tracking_uri: str | None) -> Path:
    """best.pt of a `models:/<name>/<version>`, `models:/<name>@<alias>` or `runs:/<id>/model` URI.

    Raises ModelUriError (one line) when the URI or the store cannot give a model.
    """
    store = choose_tracking_uri(tracking_uri)
    if not uri.startswith(("models:/", "runs:/")):
        raise ModelUriError(uri, store, "expected models:/<name>/<version>, models:/<name>@<alias> or runs:/<id>/model")
    if store.startswith("sqlite:///") and not Path(store.removeprefix("sqlite:///")).exists():
        raise ModelUriError(
            uri, store, "no tracking store there (pass --tracking-uri, or run from the folder holding mlflow.db)"
        )
    if uri.startswith("models:/") and (store.startswith("file:") or "://" not in store):
        raise ModelUriError(
            uri,
            store,
            "a file store has no model registry in MLflow 3; models are registered in a "
            "database store (sqlite:///mlflow.db) or an MLflow server; runs:/<id>/model still works",
        )
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # a bar per file is noise
    import mlflow
    from mlflow.exceptions import MlflowException

    destination = tempfile.mkdtemp(prefix="nmt-model-")
    try:
        with mlflow_store(store):  # models:/ URIs resolve through the registry, which does not follow tracking_uri
            folder = Path(
                mlflow.artifacts.download_artifacts(artifact_uri=uri, tracking_uri=store, dst_path=destination)
            )
    except MlflowException as err:
        shutil.rmtree(destination, ignore_errors=True)  # nothing left behind by a failed download
        raise ModelUriError(uri, store, err.message.strip().splitlines()[0][:200]) from None
    found = list(folder.rglob(checkpoint.BEST))
    if not found:
        raise ModelUriError(uri, store, "this artifact is not an nmt model (no best.pt in it)")
    return found[0]


class ModelUriError(checkpoint.CheckpointError):
    def __init__(self, uri: str, store: str, why: str):
        super().__init__(f"--model {redact(uri)}: {why} (tracking store {redact(store)})")
