"""What a model version needs to run, built in one place from the stack configuration.

``runtime_requirements(config, name, kind=None, ...)`` is used both when control registers a
locally built artifact at ``shunter up`` and when ``shunter models push`` sends a version's
requirements to the admin API: the Triton backend, the workload kind (``kind``, else the model's
in ``models.yaml``), the GPU types of the pools that serve the model, and its context length.
"""

from __future__ import annotations

from control.registry import RegistryValidationError, RuntimeRequirements
from settings.stack import StackConfig, WorkloadKind

TRITON_BACKEND = "python"  # every workload kind runs in a Triton python backend (control/repository.py)


def runtime_requirements(
    config: StackConfig | None,
    name: str,
    kind: WorkloadKind | None = None,
    min_gpu_memory_gb: float = 0.0,
    quantization: str | None = None,
) -> RuntimeRequirements:
    """The requirements of a version of model ``name``; ``config`` may be ``None`` (no stack
    configuration at hand) when ``kind`` is given. Raises ``RegistryValidationError`` when the
    kind is neither given nor configured."""
    spec = config.model(name) if config is not None else None
    chosen = kind if kind is not None else spec.kind if spec is not None else None
    if chosen is None:
        raise RegistryValidationError(f"model {name!r} is not configured and no workload kind was given")
    pools = config.pools if config is not None else ()
    return RuntimeRequirements(
        backend=TRITON_BACKEND,
        kind=chosen.value,
        gpu_types=tuple(sorted({pool.gpu_type for pool in pools if name in pool.models})),
        min_gpu_memory_gb=min_gpu_memory_gb,
        quantization=quantization,
        max_context_tokens=spec.context_tokens if spec is not None and spec.context_tokens > 0 else None,
    )
