"""``gateway conflicts list`` / ``show`` on an exceptions table an application wrote itself
(the ``$EX`` suffix is reserved, but older data may hold one): one clear line, exit 2,
never a traceback."""

from __future__ import annotations

import contextlib
import sys
from types import SimpleNamespace

import grpc
from click.testing import CliRunner

from gateway.cli import main
from gateway.client import GatewayError
from gateway.node.base.validation import InvalidRequest
from gateway.node.replication.conflict_rows import list_conflicts
from gateway.v1 import gateway_pb2, statement_pb2, value_pb2


class _FakeClient:
    def __init__(self, rows: list[gateway_pb2.Row]) -> None:
        self.rows = rows

    def scan(self, table: str, start=None, limit: int = 0) -> gateway_pb2.ScanResponse:
        assert table == "shop.items$EX"
        return gateway_pb2.ScanResponse(rows=self.rows, more=False)

    def conflicts_list(self, pattern: str = "", **kw) -> gateway_pb2.ConflictsListResponse:
        """The node's handler over a store holding ``rows``, its refusal as the RPC's."""
        sm = SimpleNamespace(schemas={"shop.items$EX": None},
                             scan_rows=lambda *_a: iter(self.rows),
                             store=SimpleNamespace(applied_index=1))
        try:
            return list_conflicts(sm, gateway_pb2.ConflictsListRequest(pattern=pattern, **kw))
        except InvalidRequest as exc:
            raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT, exc.reason,
                               exc.field) from None


def _foreign_row() -> gateway_pb2.Row:
    return gateway_pb2.Row(
        key_fields=[statement_pb2.FieldMetadata(name="id", type=value_pb2.FIELD_TYPE_INTEGER)],
        key_values=[value_pb2.Value(int_value=7)],
        fields=[statement_pb2.FieldMetadata(name="note", type=value_pb2.FIELD_TYPE_VARCHAR)],
        values=[value_pb2.Value(string_value="written by the application")])


def _run(monkeypatch, args: list[str]):
    @contextlib.contextmanager
    def fake(*_a, **_k):
        yield _FakeClient([_foreign_row()])

    # the module (``gateway.cli.conflicts`` the attribute is the click group)
    monkeypatch.setattr(sys.modules["gateway.cli.conflicts"], "_client", fake)
    return CliRunner().invoke(main, ["conflicts", *args, "--target", "127.0.0.1:1",
                                     "shop.items"] + (["1/2/3/1"] if args == ["show"] else []))


def test_conflicts_list_on_a_foreign_exceptions_table_is_one_clear_line(monkeypatch):
    res = _run(monkeypatch, ["list"])
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    (line,) = res.output.strip().splitlines()
    assert "shop.items$EX" in line and "id=7" in line and "reserved" in line
    assert "Traceback" not in res.output


def test_conflicts_show_on_a_foreign_exceptions_table_is_one_clear_line(monkeypatch):
    res = _run(monkeypatch, ["show"])
    assert res.exit_code == 2, res.output
    (line,) = res.output.strip().splitlines()
    assert "not written by conflict detection" in line
