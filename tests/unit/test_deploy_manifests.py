"""deploy/kuberay's RayCluster and RayJob checked without a cluster (issue #73 item 5), so that a misspelt key fails
here instead of in `kubectl apply` or, worse, being dropped by the API server's pruning:

- every pod template (each group's `template`, the RayJob's `rayClusterSpec` ones, its `submitterPodTemplate` when it
  has one) against Kubernetes' own OpenAPI schemas, bundled by kubernetes-validate, in strict mode (a field the
  schema does not name is refused), as a v1 PodTemplate, for the oldest and the newest Kubernetes it bundles that
  matter here (KUBERNETES_VERSIONS);
- the KubeRay fields around them against deploy/kuberay/kuberay.schema.json, written from KubeRay v1.5.1's API
  types (the version deploy/README.md requires; the schema's $comment names the files and commit).

A copy of each manifest with one misspelt key is refused by the validator that owns the key, and only by it.

What stays untested (no container runtime or cluster can start here): that the image exists and pulls; the KubeRay
operator's defaulting, its validating webhook and the CRDs' CEL rules (managedBy, deletionStrategy); the API server's
admission (quotas, pod security, LimitRanges); the Secrets the pods read existing; scheduling (a node with an
nvidia.com/gpu to give, the autoscaler's scale-up); and everything at run time: `ray start` with these
rayStartParams, the workers reaching the head, token auth, the RayJob's submitter and the sweep itself. A value of the
right type is not thereby a working one either (an image tag, a Secret's name, a Ray start flag are strings to both
schemas).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from jsonschema import Draft202012Validator

KUBERAY = Path(__file__).parents[2] / "deploy" / "kuberay"
MANIFESTS = ("raycluster.yaml", "rayjob.yaml")
SCHEMA = KUBERAY / "kuberay.schema.json"
# 1.25: the kind node KubeRay v1.5.1's CI runs on (.github/workflows/actions/kind/kind.yaml), the oldest
# kubernetes-validate bundles; 1.37: the newest it bundles. A field added or removed in between fails one of them.
KUBERNETES_VERSIONS = ("1.25", "1.37")


def load(name: str) -> dict:
    return yaml.safe_load((KUBERAY / name).read_text())


def misspelt(name: str, key: str, typo: str) -> dict:
    """The manifest with its first `key:` written `typo:`, as a person would mistype it in the file."""
    pattern = rf"^(\s*(?:- )?){re.escape(key)}:"
    text, count = re.subn(pattern, rf"\g<1>{typo}:", (KUBERAY / name).read_text(), count=1, flags=re.MULTILINE)
    assert count == 1, f"{name} has no {key}: to misspell"
    return yaml.safe_load(text)


def pod_templates(manifest: dict) -> dict[str, dict]:
    """Where each pod template lies (a JSON path) -> the template: the head's and each worker group's, of the
    RayCluster or of the RayJob's rayClusterSpec, and the RayJob's submitter pod template when it has one."""
    spec, where = manifest.get("spec", {}), "$.spec"
    templates = {}
    if manifest.get("kind") == "RayJob":
        if "submitterPodTemplate" in spec:
            templates["$.spec.submitterPodTemplate"] = spec["submitterPodTemplate"]
        spec, where = spec.get("rayClusterSpec", {}), "$.spec.rayClusterSpec"
    if "template" in spec.get("headGroupSpec", {}):
        templates[f"{where}.headGroupSpec.template"] = spec["headGroupSpec"]["template"]
    for index, group in enumerate(spec.get("workerGroupSpecs", [])):
        if "template" in group:
            templates[f"{where}.workerGroupSpecs[{index}].template"] = group["template"]
    return templates


def kubernetes_errors(manifest: dict) -> list[str]:
    """Each pod template that Kubernetes' schema refuses, at each of KUBERNETES_VERSIONS: where, and why.

    kubernetes-validate validates whole resources by kind, so each template goes in as the `template` of a v1
    PodTemplate (whose schema is PodTemplateSpec's: metadata and the pod's spec). It raises its first error only."""
    errors = []
    for where, template in pod_templates(manifest).items():
        resource = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "checked"}, "template": template}
        for version in KUBERNETES_VERSIONS:
            try:
                kubernetes_validate.validate(resource, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                inside = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in list(error.path)[1:])
                errors.append(f"{where}{inside} (Kubernetes {version}): {error.message}")
    return errors


def kuberay_errors(manifest: dict) -> list[str]:
    """Every place where the manifest's KubeRay fields break kuberay.schema.json: where, and why."""
    validator = Draft202012Validator(json.loads(SCHEMA.read_text()))
    return sorted(f"{error.json_path}: {error.message}" for error in validator.iter_errors(manifest))


def test_the_kuberay_schema_is_a_valid_json_schema():
    Draft202012Validator.check_schema(json.loads(SCHEMA.read_text()))


@pytest.mark.parametrize("name", MANIFESTS)
def test_every_pod_template_is_found(name):
    """The checks below see the head's template and each worker group's, so an empty walk cannot pass them."""
    manifest = load(name)
    cluster = manifest["spec"] if manifest["kind"] == "RayCluster" else manifest["spec"]["rayClusterSpec"]
    templates = pod_templates(manifest)
    assert len(templates) == 1 + len(cluster["workerGroupSpecs"]) + ("submitterPodTemplate" in manifest["spec"])
    assert len(templates) >= 2 and all(template["spec"]["containers"] for template in templates.values())


@pytest.mark.parametrize("name", MANIFESTS)
def test_the_manifest_is_valid_for_kubernetes_and_kuberay(name):
    manifest = load(name)
    assert kubernetes_errors(manifest) == []
    assert kuberay_errors(manifest) == []


@pytest.mark.parametrize(
    ("name", "key", "typo", "named"),
    [
        ("raycluster.yaml", "resources", "resoures", "'resoures' was unexpected"),
        # PodSpec requires containers: Kubernetes' schema names the key missing rather than the one misspelt
        ("raycluster.yaml", "containers", "containres", "'containers' is a required property"),
        ("rayjob.yaml", "resources", "resoures", "'resoures' was unexpected"),
        ("rayjob.yaml", "envFrom", "envFom", "'envFom' was unexpected"),
    ],
)
def test_a_misspelt_pod_template_key_is_refused_by_kubernetes_schema(name, key, typo, named):
    manifest = misspelt(name, key, typo)
    errors = kubernetes_errors(manifest)
    assert errors and all(named in error for error in errors), errors
    assert len(errors) == len(KUBERNETES_VERSIONS)  # one template, refused at every version
    assert kuberay_errors(manifest) == []  # a pod template's insides are Kubernetes' to check


@pytest.mark.parametrize(
    ("name", "key", "typo"),
    [
        ("raycluster.yaml", "rayStartParams", "rayStartParam"),
        ("raycluster.yaml", "enableInTreeAutoscaling", "enableInTreeAutoScaling"),
        ("raycluster.yaml", "minReplicas", "minReplica"),
        ("rayjob.yaml", "rayStartParams", "rayStartParam"),
        ("rayjob.yaml", "shutdownAfterJobFinishes", "shutdownAfterJobFinished"),
    ],
)
def test_a_misspelt_kuberay_key_is_refused_by_the_kuberay_schema(name, key, typo):
    manifest = misspelt(name, key, typo)
    errors = kuberay_errors(manifest)
    assert any(f"'{typo}' was unexpected" in error for error in errors), errors
    assert kubernetes_errors(manifest) == []


def test_a_rayjobs_submitter_pod_template_is_checked_too():
    """rayjob.yaml has none (KubeRay's default submitter runs); one added later is checked like the others."""
    manifest = load("rayjob.yaml")
    manifest["spec"]["submitterPodTemplate"] = {"spec": {"restartPolicy": "Never", "containres": []}}
    errors = kubernetes_errors(manifest)
    assert errors and all(error.startswith("$.spec.submitterPodTemplate.spec ") for error in errors), errors
    assert kuberay_errors(manifest) == []
