from pathlib import Path

import yaml

from bench.cpu import EngineIsolation
from bench.harness import private_stack_options, write_config
from settings.paths import PROJECT_ROOT, StackPaths

SHIPPED = PROJECT_ROOT / "config"


def _models(config_dir: Path) -> dict[str, dict[str, object]]:
    return {m["name"]: m for m in yaml.safe_load((config_dir / "models.yaml").read_text())["models"]}


def test_written_config_lifts_caches_and_moves_the_pools(tmp_path: Path) -> None:
    write_config(SHIPPED, tmp_path, 29100)
    models = _models(tmp_path)
    assert {m["cache_entries"] for m in models.values()} == {0}
    assert models["chat"]["parameters"] == _models(SHIPPED)["chat"]["parameters"]
    pools = yaml.safe_load((tmp_path / "pools.yaml").read_text())["pools"]
    assert pools[0]["base_port"] == 29100


def test_isolation_sets_the_engine_threads_and_nothing_else(tmp_path: Path) -> None:
    write_config(SHIPPED, tmp_path, 29100, EngineIsolation(frozenset({1}), frozenset({0}), threads=1))
    shipped, written = _models(SHIPPED), _models(tmp_path)
    assert written["chat"]["parameters"] == {**shipped["chat"]["parameters"], "n_threads": "1"}
    assert written["embed"]["parameters"] == shipped["embed"]["parameters"]


def test_a_given_scheduling_file_replaces_the_projects(tmp_path: Path) -> None:
    variant = tmp_path / "variant.yaml"
    variant.write_text((SHIPPED / "scheduling.yaml").read_text().replace("max_queued: 4096", "max_queued: 7"))
    write_config(SHIPPED, tmp_path / "default", 29100)
    write_config(SHIPPED, tmp_path / "variant", 29100, scheduling_file=variant)
    assert (tmp_path / "default" / "scheduling.yaml").read_text() == (SHIPPED / "scheduling.yaml").read_text()
    assert yaml.safe_load((tmp_path / "variant" / "scheduling.yaml").read_text())["max_queued"] == 7


def test_private_stack_options_link_the_built_artifacts_and_remove_their_folder_afterwards() -> None:
    scheduling = Path("config/scheduling.yaml")
    with private_stack_options(scheduling_file=scheduling) as options:
        root = options.state_dir.parent
        assert options.config_dir.parent == root and options.repository.parent == root
        assert (options.state_dir / "artifacts").resolve() == StackPaths().artifacts.resolve()
        assert options.scheduling_file == scheduling and options.isolation is None
    assert not root.exists()
