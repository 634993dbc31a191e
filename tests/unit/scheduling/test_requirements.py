"""A version's GPU needs against capacity profiles."""

from scheduling.capacity import CapacityProfile
from scheduling.requirements import VersionNeeds


def _profile(gpu_type: str, memory_gib: float, quantizations: frozenset[str] = frozenset()) -> CapacityProfile:
    return CapacityProfile(gpu_type, memory_gib, 100_000, 8192, 1000.0, 50.0, 1.0, quantizations=quantizations)


def test_each_need_is_checked_and_named() -> None:
    a10, h100 = _profile("a10", 24), _profile("h100", 80, frozenset({"fp8"}))
    assert VersionNeeds().unmet_by("a10", a10) is None
    assert VersionNeeds(gpu_types=frozenset({"h100"})).unmet_by("a10", a10) == "needs a GPU of ['h100'], is a10"
    assert VersionNeeds(min_gpu_memory_gb=40).unmet_by("a10", a10) == "needs 40 GB of GPU memory, has 24"
    assert VersionNeeds(min_gpu_memory_gb=40).unmet_by("h100", h100) is None
    assert VersionNeeds(quantization="fp8").unmet_by("a10", a10) == "needs quantization fp8, runs none listed"
    assert VersionNeeds(quantization="fp8", gpu_types=frozenset({"h100"})).unmet_by("h100", h100) is None


def test_the_gpu_type_is_the_pools_a_profile_name_may_differ() -> None:
    """A pool of GPU type ``cpu`` may use a profile named ``cpu-large``: the type is the pool's."""
    large = _profile("cpu-large", 64)
    assert VersionNeeds(gpu_types=frozenset({"cpu"})).unmet_by("cpu", large) is None
    assert VersionNeeds(gpu_types=frozenset({"cpu"}), min_gpu_memory_gb=100).unmet_by("cpu", None) is None
