"""A property-based fuzzer over the gateway's OpenAPI document (schemathesis), on the real stack.

Every operation of ``/openapi.json`` is called with requests generated from its schema, both
valid ones (positive) and ones that break it (negative), authenticated as a real tenant and with
the real model names in the paths. Each response must not be a 5xx, must have a status the
document lists for that operation, a documented content type, and a body that matches the
documented schema (the error body's included). Valid generations ask for 4 tokens at most (the
sampling parameters are still fuzzed). The run is bounded: ``SHUNTER_FUZZ_EXAMPLES``
examples per operation and mode (default 12), each request within 60 s; about three minutes
here, the stack's start included. A mode that cannot generate anything for an operation
(negating an operation with no body and string parameters only) is not a failure.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Err
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.integration.conftest import KEYS, RunningStack

pytestmark = pytest.mark.integration
EXAMPLES = int(os.environ.get("SHUNTER_FUZZ_EXAMPLES", "12"))
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
MODELS = ("chat", "embed", "rerank", "vision", "tabular")
# Routes whose 200 is not JSON of a documented schema or that change the stack are left out.
SKIPPED = {"/metrics"}
GENERATION = {"/v1/chat/completions", "/v1/completions"}


def _fuzz(case_strategy: Any, base_url: str, failures: list[str], label: str, statuses: list[int],
          short: bool) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=case_strategy, model=st.sampled_from((*MODELS, None)))
    def run(case: Any, model: str | None) -> None:
        if model is not None and isinstance(case.body, dict) and "model" in case.body:
            case.body["model"] = model  # mostly a real model name, sometimes an invented one
        if short and isinstance(case.body, dict):  # a valid generation stays short: bounded run time
            case.body["max_tokens"] = 4
            case.body.pop("max_completion_tokens", None)
        response = case.call_and_validate(base_url=base_url, checks=CHECKS, timeout=60,
                                          headers={"Authorization": f"Bearer {KEYS['premium']}"})
        statuses.append(response.status_code)

    try:
        run()
    except Unsatisfiable:
        pass  # nothing of this operation can be negated (no body, string path parameters only)
    except Exception as exc:  # every failing operation is reported, not only the first
        failures.append(f"{label}: {exc}"[:2000])


def test_the_gateway_holds_to_its_openapi_document(stack: RunningStack) -> None:
    schema = schemathesis.openapi.from_url(f"{stack.url}/openapi.json")
    failures: list[str] = []
    statuses: list[int] = []
    operations = 0
    for result in schema.get_all_operations():
        if isinstance(result, Err):
            failures.append(f"the document has an invalid operation: {result.err()}")
            continue
        operation = result.ok()
        if operation.path in SKIPPED:
            continue
        names = MODELS if "{name}" in operation.path else (None,)
        for name in names:
            path_parameters = {"name": name} if name is not None else None
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)
                label = f"{operation.method.upper()} {operation.path} {name or ''} {mode.value}"
                short = mode is GenerationMode.POSITIVE and operation.path in GENERATION
                _fuzz(strategy, stack.url, failures, label, statuses, short)
                operations += 1
    assert operations > 20
    assert not failures, "\n\n".join(failures)
    assert len(statuses) > 150 and {200, 400, 404} <= set(statuses), sorted(set(statuses))  # it did call
