"""Loopback ports of the integration tests, shifted by ``SHUNTER_TEST_PORT_OFFSET`` (default 0) so
that two checkouts can run their integration tests on one machine at the same time."""

from __future__ import annotations

import os

PORT_OFFSET = int(os.environ.get("SHUNTER_TEST_PORT_OFFSET", "0"))


def port(base: int) -> int:
    """``base`` moved by this run's offset."""
    return base + PORT_OFFSET
