"""The replicas document that control serves and the gateways poll."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from settings.capacity_wire import ReplicasDocument, ReplicaState


def _doc() -> ReplicasDocument:
    return ReplicasDocument.model_validate({
        "replicas": [
            {"pool": "cpu", "index": 0, "name": "cpu-0", "state": "ready", "models": ["embed"], "since_s": 12.5},
            {"pool": "cpu", "index": 1, "name": "cpu-1", "state": "starting", "models": ["embed"], "since_s": 1.0},
            {"pool": "cpu", "index": 2, "name": "cpu-2", "state": "draining", "models": ["embed"], "since_s": 0.0},
        ],
        "cold_start_s": {"embed": 3.2},
    })


def test_only_ready_replicas_take_work() -> None:
    doc = _doc()
    assert doc.ready("cpu", 0)
    assert not doc.ready("cpu", 1)
    assert not doc.ready("cpu", 2)
    assert not doc.ready("cpu", 7)
    assert doc.ready_models() == {"embed": {"cpu-0"}}
    assert doc.serves("cpu", 0, "embed")
    assert not doc.serves("cpu", 0, "vision")
    assert not doc.serves("cpu", 1, "embed")


def test_round_trips_through_json() -> None:
    doc = _doc()
    again = ReplicasDocument.model_validate_json(doc.model_dump_json())
    assert again == doc
    assert again.replicas[1].state is ReplicaState.STARTING


def test_unknown_fields_are_ignored_for_forward_compatibility() -> None:
    doc = ReplicasDocument.model_validate({"replicas": [], "cold_start_s": {}, "added_later": 1})
    assert doc.replicas == ()


@pytest.mark.parametrize("bad", [
    {"replicas": [{"pool": "cpu", "index": 0, "name": "cpu-0", "state": "warming"}]},
    {"replicas": [{"pool": "cpu", "index": -1, "name": "cpu-0", "state": "ready"}]},
    {"cold_start_s": {"embed": -1.0}},
])
def test_malformed_documents_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ReplicasDocument.model_validate(bad)
