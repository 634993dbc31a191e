"""The frozen records and their validation."""

from __future__ import annotations

import dataclasses
import math

import pytest

from control.registry import (
    AliasRecord,
    RegistryValidationError,
    RolloutRecord,
    RolloutStatus,
    RuntimeRequirements,
    VersionState,
    validate_weights,
)


def test_weights_that_add_up_to_100_are_accepted_including_zero_weights() -> None:
    assert validate_weights({1: 99.9999999, 2: 0.0000001}) == {1: 99.9999999, 2: 0.0000001}
    assert validate_weights({1: 100, 2: 0}) == {1: 100.0, 2: 0.0}
    assert validate_weights({3: 100.0 / 3, 4: 100.0 / 3, 5: 100.0 / 3}) == {3: 100 / 3, 4: 100 / 3, 5: 100 / 3}


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({}, "at least one version"),
        ({1: 90.0}, "add up to 100"),
        ({1: 100.001}, "add up to 100"),
        ({1: 110.0, 2: -10.0}, "negative"),
        ({1: math.nan}, "non-numeric"),
        ({1: math.inf}, "non-numeric"),
        ({0: 100.0}, "positive integer"),
        ({"1": 100.0}, "positive integer"),
        ({True: 100.0}, "positive integer"),
        ({1: "100"}, "non-numeric"),
    ],
)
def test_malformed_weights_are_refused(weights: dict, message: str) -> None:
    with pytest.raises(RegistryValidationError, match=message):
        validate_weights(weights)


def test_alias_record_validates_weights_and_sticky() -> None:
    with pytest.raises(RegistryValidationError, match="add up to 100"):
        AliasRecord(model="chat", weights={1: 50.0}, sticky="request", generation=1, updated_at=0.0)
    with pytest.raises(RegistryValidationError, match="sticky"):
        AliasRecord(model="chat", weights={1: 100.0}, sticky="session", generation=1, updated_at=0.0)


def test_records_are_frozen_and_do_not_share_the_callers_dict() -> None:
    weights = {1: 100.0}
    alias = AliasRecord(model="chat", weights=weights, sticky="tenant", generation=3, updated_at=5.0)
    weights[2] = 5.0
    assert alias.weights == {1: 100.0}
    with pytest.raises(dataclasses.FrozenInstanceError):
        alias.generation = 4  # type: ignore[misc]
    requirements = RuntimeRequirements(backend="onnxruntime", kind="vision", gpu_types=["t4"])  # type: ignore[arg-type]
    assert requirements.gpu_types == ("t4",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        requirements.backend = "python"  # type: ignore[misc]


def test_rollout_record_refuses_an_unknown_kind() -> None:
    with pytest.raises(RegistryValidationError, match="kind"):
        RolloutRecord(
            id=1, model="chat", kind="shadow", baseline_version=1, variants={1: 100.0}, sticky="request",
            status=RolloutStatus.RUNNING, thresholds={}, started_at=0.0, updated_at=0.0, started_by="ops",
        )  # fmt: skip


def test_requirements_refuse_nonsense() -> None:
    with pytest.raises(RegistryValidationError, match="backend"):
        RuntimeRequirements(backend="", kind="chat")
    with pytest.raises(RegistryValidationError, match="min_gpu_memory_gb"):
        RuntimeRequirements(backend="python", kind="chat", min_gpu_memory_gb=-1.0)


def test_states_and_statuses_are_strings() -> None:
    assert VersionState.READY == "ready"
    assert RolloutStatus.PAUSED.active
    assert not RolloutStatus.ROLLED_BACK.active
