"""Inference on a batched (non-decoupled) Triton model from the gateway.

``infer_rows`` sends ``columns`` (equal numbers of rows) in chunks of at most the model's
``max_batch_size`` rows on one leased worker and concatenates each requested output, so one
API request may be larger than a Triton batch. Every call is bounded by ``timeout_s``.
"""

from __future__ import annotations

import numpy as np
import tritonclient.grpc.aio as grpcclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from gateway.state import GatewayState
from gateway.workers import map_triton_error
from scheduling.tenants import Tenant


def text_rows(texts: list[str]) -> np.ndarray:
    """A BYTES column [rows, 1] of UTF-8 strings."""
    return np.array([[t.encode("utf-8")] for t in texts], dtype=np.object_)


async def infer_rows(state: GatewayState, model: str, request_id: str, tenant: Tenant,
                     columns: dict[str, np.ndarray], outputs: list[str],
                     timeout_s: float = 60.0) -> dict[str, np.ndarray]:
    spec = state.config.model(model)
    rows = len(next(iter(columns.values())))
    chunk = spec.batching.max_batch_size if spec is not None and spec.batching.max_batch_size else rows
    parts: dict[str, list[np.ndarray]] = {name: [] for name in outputs}
    requested = [grpcclient.InferRequestedOutput(name) for name in outputs]
    async with state.pool.lease(model, tenant.allowed_regions) as worker:
        for start in range(0, rows, chunk):
            inputs = []
            for name, column in columns.items():
                part = column[start:start + chunk]
                tensor = grpcclient.InferInput(name, list(part.shape), np_to_triton_dtype(part.dtype))
                tensor.set_data_from_numpy(part)
                inputs.append(tensor)
            try:
                result = await worker.client.infer(
                    model, inputs, outputs=requested, request_id=request_id,
                    priority=tenant.tier.triton_priority, client_timeout=timeout_s)
            except InferenceServerException as exc:
                raise map_triton_error(exc, model) from exc
            for name in outputs:
                parts[name].append(result.as_numpy(name))
    return {name: np.concatenate(values) for name, values in parts.items()}
