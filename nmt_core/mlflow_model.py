"""A trained model as an MLflow model: a pyfunc that translates, logged by every finished trial.

Why pyfunc: `mlflow.pyfunc.load_model("models:/<sweep>/<version>").predict(["a sentence"])` then works in
any Python with this package, and `nmt translate --model models:/...` reads the same folder. The folder
holds one file besides MLflow's: best.pt, the best-dev weights with their config, vocabularies and
subword models (everything translation needs).
"""
from __future__ import annotations

import logging
import os
import tempfile
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

import mlflow.pyfunc
from mlflow.exceptions import MlflowException

from nmt_core import checkpoint

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # a bar per copied file is noise
CHECKPOINT_ARTIFACT = "checkpoint"  # the key (and file stem) of best.pt inside the MLflow model
DEFAULT_TRACKING = "sqlite:///mlflow.db"  # the sweeper's default store, in the working folder


class Translator(mlflow.pyfunc.PythonModel):
    """predict(list of source lines, or a DataFrame whose first column holds them) -> list of translations."""

    def load_context(self, context) -> None:
        self.loaded = checkpoint.load_for_inference(context.artifacts[CHECKPOINT_ARTIFACT])

    def predict(self, context, model_input: list[str], params: dict[str, Any] | None = None) -> list[str]:
        from nmt_core.inference import translate_lines

        lines = list(model_input.iloc[:, 0]) if hasattr(model_input, "iloc") else list(model_input)
        beam = int((params or {}).get("beam_size", self.loaded.config.decode.beam_size))
        return translate_lines([str(line) for line in lines], self.loaded, beam)[0]


def best_model_state(state: dict[str, Any]) -> dict[str, Any]:
    """What translation needs from a training state: the best-dev weights, config, vocabularies, subwords."""
    return {"format": checkpoint.FORMAT, "model": state["best_model"], "config": state["config"],
            "vocab": state["vocab"], "subword": state.get("subword", {}), "epoch": state["best_epoch"]}


def save_model(state: dict[str, Any], out: Path) -> None:
    """Write the MLflow model folder `out` from a training state (last.pt's contents)."""
    with tempfile.TemporaryDirectory() as tmp:
        best = Path(tmp) / checkpoint.BEST
        checkpoint.save(best_model_state(state), best)
        # pinned requirements instead of MLflow's inference, which imports the model in a subprocess (seconds);
        # MLflow's advice to log models from code instead of a pickled object does not apply to a stateless class
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.getLogger("mlflow.pyfunc").setLevel(logging.ERROR)
            mlflow.pyfunc.save_model(str(out), python_model=Translator(), artifacts={CHECKPOINT_ARTIFACT: str(best)},
                                     pip_requirements=[f"{name}=={metadata.version(name)}"
                                                       for name in ("nmt-sweeper", "torch", "sacrebleu", "mlflow")])


def download_model(uri: str, tracking_uri: str | None) -> Path:
    """best.pt of a `models:/<name>/<version>`, `models:/<name>@<alias>` or `runs:/<id>/model` URI.

    Raises ModelUriError (one line) when the URI or the store cannot give a model.
    """
    store = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING
    if not uri.startswith(("models:/", "runs:/")):
        raise ModelUriError(uri, store, "expected models:/<name>/<version>, models:/<name>@<alias> or runs:/<id>/model")
    if store.startswith("sqlite:///") and not Path(store.removeprefix("sqlite:///")).exists():
        raise ModelUriError(uri, store, "no tracking store there (pass --tracking-uri, or run from the folder "
                            "holding mlflow.db)")
    mlflow.set_tracking_uri(store)
    mlflow.set_registry_uri(store)  # models:/ URIs resolve through the registry, which does not follow the tracking URI
    try:
        folder = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, tracking_uri=store,
                                                          dst_path=tempfile.mkdtemp(prefix="nmt-model-")))
    except MlflowException as err:
        raise ModelUriError(uri, store, err.message.strip().splitlines()[0][:200]) from None
    found = list(folder.rglob(checkpoint.BEST))
    if not found:
        raise ModelUriError(uri, store, "this artifact is not an nmt model (no best.pt in it)")
    return found[0]


class ModelUriError(checkpoint.CheckpointError):
    def __init__(self, uri: str, store: str, why: str):
        super().__init__(f"--model {uri}: {why} (tracking store {store})")
