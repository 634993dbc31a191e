from pathlib import Path

import pytest

from scheduling.tenants import Tier
from settings.paths import StackPaths
from settings.stack import ConfigError
from settings.tenants import hash_api_key, load_tenants


def test_demo_keys_authenticate_to_one_tenant_per_tier() -> None:
    tenants = load_tenants(StackPaths().tenants_file)
    found = {key: tenants.authenticate(key) for key in ("demo-premium-key", "demo-standard-key", "demo-batch-key")}
    assert {t.tier for t in found.values() if t} == {Tier.PREMIUM, Tier.STANDARD, Tier.BATCH}
    assert tenants.authenticate("demo-premium-keyx") is None
    assert tenants.authenticate("") is None


def test_tenants_file_stores_only_key_hashes() -> None:
    text = StackPaths().tenants_file.read_text()
    assert hash_api_key("demo-premium-key") in text
    for line in text.splitlines():
        assert "demo-premium-key" not in line.split("#")[0]


def test_one_key_for_two_tenants_is_rejected(tmp_path: Path) -> None:
    digest = hash_api_key("k")
    path = tmp_path / "tenants.yaml"
    path.write_text(f"tenants:\n  - {{name: a, tier: batch, api_key_sha256: [{digest}]}}\n"
                    f"  - {{name: b, tier: batch, api_key_sha256: [{digest}]}}\n")
    with pytest.raises(ConfigError, match="two tenants"):
        load_tenants(path)


def test_malformed_hash_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "tenants.yaml"
    path.write_text("tenants:\n  - {name: a, tier: batch, api_key_sha256: [plaintext-key]}\n")
    with pytest.raises(ConfigError):
        load_tenants(path)
