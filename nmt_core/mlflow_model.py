"""A trained model as an MLflow model: a pyfunc that translates, logged by every finished trial.

Why pyfunc: `mlflow.pyfunc.load_model("models:/<sweep>@best").predict(["a sentence"])` then works in any
Python with this package, and `nmt translate --model models:/...` reads the same folder. The folder is
written by hand (an MLmodel file naming this module as the pyfunc's `loader_module`, and best.pt): MLflow's
own `save_model` costs a trial 2-3 s of imports and pickles a class, for three small files.
"""
from __future__ import annotations

import os
import platform
import shutil
import tempfile
import uuid
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from nmt_core import checkpoint
from nmt_core.credentials import check_uri

DEFAULT_TRACKING = "sqlite:///mlflow.db"  # the sweeper's default store, in the working folder
REQUIREMENTS = ("nmt-sweeper", "torch", "sacrebleu", "mlflow")


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
        """A list of source lines, or a DataFrame whose first column holds them; beam: the config's
        decode.beam_size (MLflow passes no params to a model without a signature)."""
        from nmt_core.inference import translate_lines

        lines = list(model_input.iloc[:, 0]) if hasattr(model_input, "iloc") else list(model_input)
        return translate_lines([str(line) for line in lines], self.loaded, self.loaded.config.decode.beam_size)[0]


def _load_pyfunc(data_path: str) -> Translator:
    """MLflow's pyfunc loader protocol (`loader_module`): `data_path` is the model's best.pt."""
    return Translator(data_path)


def best_model_state(state: dict[str, Any]) -> dict[str, Any]:
    """What translation needs from a training state: the best-dev weights, config, vocabularies, subwords."""
    return {"format": checkpoint.FORMAT, "model": state["best_model"], "config": state["config"],
            "vocab": state["vocab"], "subword": state.get("subword", {}), "epoch": state["best_epoch"]}


def save_model(state: dict[str, Any], out: Path) -> None:
    """Write the MLflow model folder `out` (MLmodel, best.pt, requirements.txt) from a training state."""
    out.mkdir(parents=True, exist_ok=True)
    checkpoint.save(best_model_state(state), out / checkpoint.BEST)
    versions = {name: metadata.version(name) for name in REQUIREMENTS}
    mlmodel = {
        "artifact_path": "model",
        "flavors": {"python_function": {"loader_module": __name__, "data": checkpoint.BEST,
                                        "python_version": platform.python_version(),
                                        "env": {"virtualenv": "python_env.yaml"}}},
        "mlflow_version": versions["mlflow"],
        "model_uuid": uuid.uuid4().hex,
        "utc_time_created": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f"),
    }
    (out / "MLmodel").write_text(yaml.safe_dump(mlmodel, sort_keys=False), encoding="utf-8")
    requirements = [f"{name}=={version}" for name, version in versions.items()]
    (out / "requirements.txt").write_text("\n".join(requirements) + "\n", encoding="utf-8")
    (out / "python_env.yaml").write_text(yaml.safe_dump({"python": platform.python_version(),
                                                         "build_dependencies": ["pip"],
                                                         "dependencies": ["-r requirements.txt"]}), encoding="utf-8")


def download_model(uri: str, tracking_uri: str | None) -> Path:
    """best.pt of a `models:/<name>/<version>`, `models:/<name>@<alias>` or `runs:/<id>/model` URI.

    Raises ModelUriError (one line) when the URI or the store cannot give a model.
    """
    store = choose_tracking_uri(tracking_uri)
    if not uri.startswith(("models:/", "runs:/")):
        raise ModelUriError(uri, store, "expected models:/<name>/<version>, models:/<name>@<alias> or runs:/<id>/model")
    if store.startswith("sqlite:///") and not Path(store.removeprefix("sqlite:///")).exists():
        raise ModelUriError(uri, store, "no tracking store there (pass --tracking-uri, or run from the folder "
                            "holding mlflow.db)")
    if uri.startswith("models:/") and (store.startswith("file:") or "://" not in store):
        raise ModelUriError(uri, store, "a file store has no model registry in MLflow 3; models are registered in a "
                            "database store (sqlite:///mlflow.db) or an MLflow server; runs:/<id>/model still works")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # a bar per file is noise
    import mlflow
    from mlflow.exceptions import MlflowException

    mlflow.set_tracking_uri(store)
    mlflow.set_registry_uri(store)  # models:/ URIs resolve through the registry, which does not follow the tracking URI
    destination = tempfile.mkdtemp(prefix="nmt-model-")
    try:
        folder = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, tracking_uri=store, dst_path=destination))
    except MlflowException as err:
        shutil.rmtree(destination, ignore_errors=True)  # nothing left behind by a failed download
        raise ModelUriError(uri, store, err.message.strip().splitlines()[0][:200]) from None
    found = list(folder.rglob(checkpoint.BEST))
    if not found:
        raise ModelUriError(uri, store, "this artifact is not an nmt model (no best.pt in it)")
    return found[0]


class ModelUriError(checkpoint.CheckpointError):
    def __init__(self, uri: str, store: str, why: str):
        super().__init__(f"--model {uri}: {why} (tracking store {store})")
