"""The console's cluster view carries each table's schema version as Status gives it
(docs/schema.md; the page renders them in the cluster's card)."""

from __future__ import annotations

from gateway.console.poller import ClusterView
from gateway.console.views import _cluster
from gateway.v1 import gateway_pb2, schema_pb2


def test_the_cluster_view_lists_each_tables_schema_version() -> None:
    st = gateway_pb2.StatusResponse(node_id=1, cluster_id=7, role="leader", leader_id=1)
    st.tables.extend([schema_pb2.TableVersion(table="shop.items", version=4),
                      schema_pb2.TableVersion(table="shop.logs", version=1, implicit=True)])
    doc = _cluster(ClusterView(7, ["127.0.0.1:1"], status=st))
    assert [(t["table"], t["version"], t["implicit"]) for t in doc["tables"]] == [
        ("shop.items", "4", False), ("shop.logs", "1", True)]
