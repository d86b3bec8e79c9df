"""A small inventory service that keeps its stock in Gateway (an example application)."""

from __future__ import annotations

from gateway.client import GatewayClient, row_insert, row_update

TABLE = "shop.stock"


class OutOfStock(Exception):
    """Fewer items left than asked for."""


class Inventory:
    """Stock per SKU in ``shop.stock``; every change is one Gateway transaction."""

    def __init__(self, client: GatewayClient) -> None:
        self.client = client

    def add_product(self, sku: str, name: str, quantity: int) -> None:
        self.client.write([row_insert(TABLE, {"sku": sku}, {"name": name, "qty": quantity})])

    def stock(self, sku: str) -> int:
        row = self.client.get(TABLE, sku)
        return 0 if row is None else int(row["qty"])

    def take(self, sku: str, quantity: int) -> int:
        """Take ``quantity`` items; the stock left. Raises ``OutOfStock``."""
        left = self.stock(sku) - quantity
        if left < 0:
            raise OutOfStock(f"{sku}: {quantity} asked, {left + quantity} left")
        self.client.write([row_update(TABLE, {"sku": sku}, {"qty": left})])
        return left
