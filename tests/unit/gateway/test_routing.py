"""The gateway's routing table: the control plane's document in, one version per request out."""

from __future__ import annotations

import pytest

from gateway.routing import RoutingTable, parse_routes
from scheduling.traffic_split import StickyTo, TrafficSplit


def test_the_routing_document_becomes_traffic_splits() -> None:
    generation, splits = parse_routes({"generation": 7, "aliases": [
        {"model": "embed", "weights": {"2": 90.0, "3": 10.0}, "sticky": "tenant", "generation": 4}]})
    assert generation == 7
    assert splits["embed"].weights == {2: 90.0, 3: 10.0}
    assert splits["embed"].sticky is StickyTo.TENANT


@pytest.mark.parametrize("body", [[], {"generation": 1}, {"generation": 1, "aliases": [{"model": "m"}]},
                                  {"generation": 1, "aliases": [{"model": "m", "weights": {"1": 50}}]}])
def test_a_malformed_document_is_refused(body: object) -> None:
    with pytest.raises((ValueError, KeyError, TypeError)):
        parse_routes(body)


def test_replacing_routes_keeps_unnamed_models_and_notifies() -> None:
    table = RoutingTable({"embed": TrafficSplit("embed", {1: 100.0}), "chat": TrafficSplit("chat", {1: 100.0})})
    changes: list[int] = []
    table.on_change.append(lambda: changes.append(table.generation))
    table.replace(3, {"embed": TrafficSplit("embed", {1: 0.0, 2: 100.0})})
    assert table.live_versions() == {"embed": frozenset({1, 2}), "chat": frozenset({1})}
    assert table.choose("embed", "req_1", "acme") == 2
    assert changes == [3]
