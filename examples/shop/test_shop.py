"""The inventory service's tests, written the way an application team writes them against
Gateway: the ``gateway`` fixture of Gateway's pytest plugin (a container where Docker runs and
the image exists, a local process elsewhere) and the service under test on its client."""

from __future__ import annotations

import pytest
from shop import Inventory, OutOfStock


@pytest.fixture
def inventory(gateway):
    with gateway.client(timeout=30) as client:
        yield Inventory(client)


def test_stock_goes_down_as_items_are_taken(inventory):
    inventory.add_product("A-1", "anvil", 3)
    assert inventory.take("A-1", 2) == 1
    assert inventory.stock("A-1") == 1


def test_taking_more_than_the_stock_is_refused_and_changes_nothing(inventory):
    inventory.add_product("B-2", "bell", 1)
    with pytest.raises(OutOfStock, match="2 asked, 1 left"):
        inventory.take("B-2", 2)
    assert inventory.stock("B-2") == 1


def test_each_test_gets_a_fresh_gateway(inventory):
    assert inventory.stock("A-1") == 0  # the first test's product is not here


@pytest.mark.gateway(plugins=["sqlite"])
def test_the_embedded_sqlite_applier_sees_the_rows(gateway):
    with gateway.client(timeout=30) as client:
        Inventory(client).add_product("C-3", "cog", 7)
        status = client.status()
    assert [a.name for a in status.appliers] == ["sqlite"]


def test_the_stock_survives_the_loss_of_the_leader(gateway_cluster):
    """Three nodes: the leader dies, the service goes on."""
    with gateway_cluster.client(timeout=30) as client:
        Inventory(client).add_product("D-4", "drum", 5)
    gateway_cluster.kill(gateway_cluster.leader())
    with gateway_cluster.client(timeout=30) as client:
        inventory = Inventory(client)
        assert inventory.take("D-4", 1) == 4
        assert inventory.stock("D-4") == 4
