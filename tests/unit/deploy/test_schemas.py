"""Every rendered object is valid: built-in kinds against the Kubernetes schemas (kubernetes-validate,
strict: unknown fields are errors), ScaledObjects and ServiceMonitors against their vendored CRDs'
openAPIV3Schema (jsonschema, plus the apiserver's pruning rule: a field the schema does not name
is an error unless the schema preserves unknown fields)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.unit.deploy.conftest import Rendered

KUBERNETES_VERSION = "1.32.0"
CRDS = Path(__file__).parent / "crds"
CRD_FILES = {("keda.sh/v1alpha1", "ScaledObject"): "keda.sh_scaledobjects.yaml",
             ("monitoring.coreos.com/v1", "ServiceMonitor"): "monitoring.coreos.com_servicemonitors.yaml"}


@cache
def crd_schema(api_version: str, kind: str) -> dict[str, Any]:
    crd = yaml.safe_load((CRDS / CRD_FILES[(api_version, kind)]).read_text())
    version = api_version.split("/")[1]
    served = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
    return schema


def unknown_fields(value: Any, schema: dict[str, Any], where: str = "") -> list[str]:
    """Paths of fields that the structural ``schema`` does not declare (what the apiserver prunes)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(value, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        found = []
        for key, item in value.items():
            if properties is not None and key in properties:
                found += unknown_fields(item, properties[key], f"{where}.{key}")
            elif isinstance(extra, dict):
                found += unknown_fields(item, extra, f"{where}.{key}")
            elif properties is not None or extra is False:
                found.append(f"{where}.{key}")
        return found
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [path for i, item in enumerate(value) for path in unknown_fields(item, schema["items"], f"{where}[{i}]")]
    return []


def validate_custom(obj: dict[str, Any]) -> None:
    schema = crd_schema(obj["apiVersion"], obj["kind"])
    jsonschema.validate(obj, schema)
    assert unknown_fields(obj, schema) == [], f"{obj['kind']}/{obj['metadata']['name']}: fields the CRD lacks"


def test_every_builtin_object_passes_the_kubernetes_schema_strictly(rendered: Rendered) -> None:
    builtin = [o for o in rendered.objects if (o["apiVersion"], o["kind"]) not in CRD_FILES]
    assert {o["kind"] for o in builtin} >= {"Deployment", "Service", "ConfigMap", "NetworkPolicy",
                                            "PodDisruptionBudget", "HorizontalPodAutoscaler", "Namespace"}
    for obj in builtin:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_every_custom_resource_passes_its_crd_schema(rendered: Rendered) -> None:
    custom = [o for o in rendered.objects if (o["apiVersion"], o["kind"]) in CRD_FILES]
    assert {o["kind"] for o in custom} == {"ScaledObject", "ServiceMonitor"}
    for obj in custom:
        validate_custom(obj)
    assert not [o for o in rendered.objects if o["apiVersion"].startswith(("keda.sh", "monitoring.coreos.com"))
                and (o["apiVersion"], o["kind"]) not in CRD_FILES], "a custom kind with no vendored CRD"


def test_the_crd_check_catches_a_misspelt_field_and_a_wrong_type(rendered: Rendered) -> None:
    scaled = rendered.of_kind("ScaledObject")[0]
    misspelt = {**scaled, "spec": {**scaled["spec"], "minReplicas": 0}}
    with pytest.raises(AssertionError, match="fields the CRD lacks"):
        validate_custom(misspelt)
    wrong_type = {**scaled, "spec": {**scaled["spec"], "maxReplicaCount": "four"}}
    with pytest.raises(jsonschema.ValidationError):
        validate_custom(wrong_type)


def test_the_kubernetes_check_catches_an_unknown_field(rendered: Rendered) -> None:
    deployment = rendered.of_kind("Deployment")[0]
    broken = {**deployment, "spec": {**deployment["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)
