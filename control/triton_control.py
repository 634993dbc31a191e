"""Triton's repository API on one worker: load a model, read which versions are READY, warm one.

``load(address, model)`` asks the worker to (re)load ``model`` from the repository, which loads
the versions its rendered version policy lists and unloads the others; Triton keeps serving the
versions it already had until the reload succeeds, and a failed reload leaves them loaded.
``unload`` removes a model from one worker (the requests in flight on it finish; ``loaded``
tells when it is gone).
``ready_versions`` (one model) and ``ready_models`` (the whole worker) read the repository index.
``warm_request`` sends one real inference to one version (a sample input per workload kind), so
the first user request does not pay for lazy initialisation; for an LLM it asks for a single
token over a gRPC stream. Every call is bounded.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterable

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from control.errors import ControlError
from control.repository import BACKENDS_DIR
from settings.stack import ModelSpec, WorkloadKind
from settings.workers import WorkerAddress

WARM_TEXT = "Shunter warms this version up before it takes traffic."


class TritonControlError(ControlError, RuntimeError):
    """A load, readiness wait or warm request failed; the message names the worker."""


def _http(address: WorkerAddress, timeout_s: float) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(f"{address.host}:{address.http_port}",
                                            connection_timeout=timeout_s, network_timeout=timeout_s)


def without_traceback(message: str) -> str:
    """Triton's error text without the Python traceback a python-backend model appends to it
    (``"...\n\nAt:\n  file(line): function..."``): the operator reads the cause, the worker log keeps
    the traceback."""
    cause = message.split("\n\nAt:\n", 1)[0].strip()
    return " ".join(cause.split())


def load(address: WorkerAddress, model: str, timeout_s: float) -> None:
    """(Re)load ``model`` on the worker from the repository; raise TritonControlError on failure."""
    client = _http(address, timeout_s)
    try:
        client.load_model(model)
    except InferenceServerException as exc:
        cause = without_traceback(exc.message() or str(exc))
        raise TritonControlError(f"worker {address.name}: loading {model} failed: {cause} "
                                 "(the traceback is in the worker's log)") from exc
    except OSError as exc:  # refused, reset, unreachable: the worker is not there
        raise TritonControlError(f"worker {address.name}: loading {model} failed: {exc}") from exc
    finally:
        client.close()


def unload(address: WorkerAddress, model: str, timeout_s: float) -> None:
    """Ask the worker to unload ``model``; Triton lets the requests in flight on it finish first
    (poll ``loaded`` to see when it is gone). Raise TritonControlError on failure."""
    client = _http(address, timeout_s)
    try:
        client.unload_model(model)
    except InferenceServerException as exc:
        raise TritonControlError(f"worker {address.name}: unloading {model} failed: {exc.message()}") from exc
    finally:
        client.close()


def ready_models(address: WorkerAddress, timeout_s: float = 5.0) -> frozenset[str] | None:
    """The models with a version READY on the worker, from one repository-index call (None when
    the worker does not answer)."""
    client = _http(address, timeout_s)
    try:
        index = client.get_model_repository_index()
    except (InferenceServerException, OSError):
        return None
    finally:
        client.close()
    return frozenset(str(e["name"]) for e in index if e.get("state") == "READY" and "name" in e)


def loaded(address: WorkerAddress, model: str, timeout_s: float = 5.0) -> bool:
    """Whether any version of ``model`` is READY or still UNLOADING on the worker (False when the
    worker does not answer: nothing can run there)."""
    client = _http(address, timeout_s)
    try:
        index = client.get_model_repository_index()
    except (InferenceServerException, OSError):
        return False
    finally:
        client.close()
    return any(e.get("name") == model and e.get("state") in ("READY", "UNLOADING", "LOADING") for e in index)


def ready_versions(address: WorkerAddress, model: str, timeout_s: float = 5.0) -> set[int]:
    """The versions of ``model`` READY on the worker (empty if it is unreachable)."""
    client = _http(address, timeout_s)
    try:
        index = client.get_model_repository_index()
    except (InferenceServerException, OSError):
        return set()
    finally:
        client.close()
    return {int(e["version"]) for e in index
            if e.get("name") == model and e.get("state") == "READY" and str(e.get("version", "")).isdigit()}


def wait_versions(addresses: Iterable[WorkerAddress], model: str, versions: set[int], timeout_s: float) -> None:
    """Wait until every worker has exactly ``versions`` of ``model`` READY."""
    pending = list(addresses)
    deadline = time.monotonic() + timeout_s
    while pending:
        pending = [a for a in pending if ready_versions(a, model) != versions]
        if not pending:
            return
        if time.monotonic() > deadline:
            seen = {a.name: sorted(ready_versions(a, model)) for a in pending}
            raise TritonControlError(f"{model}: versions {sorted(versions)} not READY after {timeout_s:.0f} s "
                                     f"(READY now: {seen})")
        time.sleep(0.25)


def _sample_inputs(spec: ModelSpec) -> list[grpcclient.InferInput]:
    def tensor(name: str, array: np.ndarray, datatype: str) -> grpcclient.InferInput:
        item = grpcclient.InferInput(name, list(array.shape), datatype)
        item.set_data_from_numpy(array)
        return item
    text = np.array([[WARM_TEXT.encode()]], dtype=np.object_)
    if spec.kind is WorkloadKind.EMBEDDING:
        return [tensor("text", text, "BYTES")]
    if spec.kind is WorkloadKind.RERANK:
        return [tensor("query", text, "BYTES"), tensor("document", text, "BYTES")]
    if spec.kind is WorkloadKind.TABULAR:
        return [tensor("features", np.zeros((1, 64), dtype=np.float32), "FP32")]
    if spec.kind is WorkloadKind.LLM:
        return [tensor("prompt", np.array([WARM_TEXT.encode()], dtype=np.object_), "BYTES"),
                tensor("max_tokens", np.array([1], dtype=np.int32), "INT32")]
    image = (BACKENDS_DIR / "vision" / "warmup.png").read_bytes()
    return [tensor("image", np.array([[image]], dtype=np.object_), "BYTES")]


def warm_request(address: WorkerAddress, spec: ModelSpec, version: int, timeout_s: float = 60.0) -> float:
    """Send one sample inference to ``version`` of ``spec`` on the worker; return its latency in s."""
    client = grpcclient.InferenceServerClient(f"{address.host}:{address.grpc_port}")
    started = time.monotonic()
    try:
        if spec.kind is WorkloadKind.LLM:
            _warm_stream(client, spec.name, version, _sample_inputs(spec), timeout_s)
        else:
            client.infer(spec.name, _sample_inputs(spec), model_version=str(version), client_timeout=timeout_s)
    except InferenceServerException as exc:
        raise TritonControlError(f"worker {address.name}: warm request to {spec.name} v{version} failed: "
                                 f"{exc.message()}") from exc
    finally:
        client.close()
    return time.monotonic() - started


def _warm_stream(client: grpcclient.InferenceServerClient, model: str, version: int,
                 inputs: list[grpcclient.InferInput], timeout_s: float) -> None:
    results: queue.Queue[tuple[object, InferenceServerException | None]] = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        client.async_stream_infer(model, inputs, model_version=str(version), enable_empty_final_response=True)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                result, error = results.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise TritonControlError(f"{model} v{version}: no warm response in {timeout_s:.0f} s") from None
            if error is not None:
                raise error
            response = result.get_response()  # type: ignore[attr-defined]
            final = response.parameters.get("triton_final_response")
            if final is not None and final.bool_param:
                return
    finally:
        client.stop_stream()
