"""How often ``CassandraApplier.apply_schema`` reads the table's metadata, without a server:
a fake driver session and cluster record the statements and the metadata refreshes."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

from gateway_cassandra import CassandraApplier
from gateway_cassandra.applier import CassandraSettings

from gateway.schema.model import Column, SchemaEvent, TableDef


class FakeCluster:
    """The driver's ``Cluster`` as the applier uses it: ``metadata.keyspaces`` and
    ``refresh_table_metadata`` (counted). ``columns`` is what the server holds (name ->
    CQL type)."""

    def __init__(self) -> None:
        self.columns: dict[str, str | None] = {"id": "bigint", "name": "text"}
        self.refreshes = 0
        self.metadata = SimpleNamespace(keyspaces={})
        self._mirror()

    def _mirror(self) -> None:
        table = SimpleNamespace(columns={n: SimpleNamespace(cql_type=t)
                                         for n, t in self.columns.items()},
                                primary_key=[SimpleNamespace(name="id")],
                                partition_key=[SimpleNamespace(name="id")])
        self.metadata.keyspaces = {"s": SimpleNamespace(tables={"t": table})}

    def refresh_table_metadata(self, keyspace: str, table: str) -> None:
        self.refreshes += 1
        self._mirror()


class FakeSession:
    """Runs ``ALTER TABLE ... ADD/DROP`` on the fake cluster; when ``agreed`` the answer
    says the driver re-read the metadata (as the real driver does once the nodes agree)."""

    def __init__(self, cluster: FakeCluster, agreed: bool) -> None:
        self.cluster, self.agreed = cluster, agreed
        self.statements: list[str] = []

    def execute(self, cql: str, params: Any = ()) -> Any:
        self.statements.append(cql)
        m = re.search(r'ALTER TABLE \S+ (ADD|DROP) "?(\w+)"?(?: (\w+))?', cql)
        if m:
            if m[1] == "ADD":
                self.cluster.columns[m[2]] = m[3]
            else:
                self.cluster.columns.pop(m[2], None)
            if self.agreed:
                self.cluster._mirror()
        return SimpleNamespace(response_future=SimpleNamespace(is_schema_agreed=self.agreed))


def _applier(agreed: bool) -> tuple[CassandraApplier, FakeCluster, FakeSession]:
    applier = CassandraApplier(CassandraSettings(hosts=("127.0.0.1",)))
    cluster = FakeCluster()
    session = FakeSession(cluster, agreed)
    applier._cluster, applier._session = cluster, session  # type: ignore[assignment]
    return applier, cluster, session


def _add(name: str, version: int = 2) -> SchemaEvent:
    col = Column(name, "INTEGER", 0)
    return SchemaEvent("s.t", version, "add_column", column=col, definition=TableDef(
        "s.t", version, (Column("id", "INTEGER"), Column("name", "VARCHAR"), col), ("id",)))


def test_a_change_the_driver_refreshed_is_not_read_back_again() -> None:
    applier, cluster, session = _applier(agreed=True)
    applier.apply_schema(_add("c"))
    assert session.statements == ['ALTER TABLE "s"."t" ADD "c" bigint']
    # the read before the change (idempotence) only: the driver read it after
    assert cluster.refreshes == 1
    assert "c" in cluster.metadata.keyspaces["s"].tables["t"].columns


def test_a_change_without_schema_agreement_is_read_back_for_the_rows_after_it() -> None:
    applier, cluster, session = _applier(agreed=False)
    applier.apply_schema(_add("c"))
    assert session.statements == ['ALTER TABLE "s"."t" ADD "c" bigint']
    assert cluster.refreshes == 2
    assert "c" in cluster.metadata.keyspaces["s"].tables["t"].columns


def test_a_change_made_already_runs_no_statement_and_reads_nothing_back() -> None:
    applier, cluster, session = _applier(agreed=False)
    cluster.columns["c"] = None
    cluster._mirror()
    applier.apply_schema(_add("c"))
    assert session.statements == []
    assert cluster.refreshes == 1
