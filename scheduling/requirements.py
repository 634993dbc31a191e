"""What a model version needs of a worker's GPU, checked against a capacity profile.

``VersionNeeds`` mirrors the registry's runtime requirements that a GPU can fail (the GPU types
it is built for, the memory it needs, the quantization it runs); ``unmet_by(gpu_type, profile)``
is None when a worker of that pool's GPU type and capacity profile can run it, else the reason.
Control refuses to deploy a version no pool serving its model meets (``control/deployer.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.capacity import CapacityProfile


@dataclass(frozen=True)
class VersionNeeds:
    gpu_types: frozenset[str] = frozenset()  # empty: any GPU type
    min_gpu_memory_gb: float = 0.0
    quantization: str | None = None

    def unmet_by(self, gpu_type: str, profile: CapacityProfile | None) -> str | None:
        """Why a worker of ``gpu_type`` (its pool's) and capacity ``profile`` (None: unknown, only
        the GPU type is checked) cannot run the version (None: it can)."""
        if self.gpu_types and gpu_type not in self.gpu_types:
            return f"needs a GPU of {sorted(self.gpu_types)}, is {gpu_type}"
        if profile is None:
            return None
        if profile.memory_gib < self.min_gpu_memory_gb:
            return f"needs {self.min_gpu_memory_gb:g} GB of GPU memory, has {profile.memory_gib:g}"
        if self.quantization is not None and self.quantization not in profile.quantizations:
            runs = sorted(profile.quantizations) or "none listed"
            return f"needs quantization {self.quantization}, runs {runs}"
        return None
