"""deploy/grafana/gateway.json queries only metrics a real node exports (issue 55 item 4):
a node with a channel, an applier and a conflict rule is scraped over HTTP, and every metric
name in the dashboard's PromQL (panels and variables) must be among the scraped series."""

from __future__ import annotations

import dataclasses
import json
import re
import urllib.request
from pathlib import Path

from prometheus_client import CollectorRegistry, start_http_server

from gateway.client import AsyncGatewayClient, row_insert
from gateway.node.api.metrics import NodeCollector
from gateway.node.base.config import ChannelConfig

from .conftest import free_ports, leader_of, node_configs, run, running, wait_for

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "gateway.json"
#: PromQL words that are not metric names (operators, modifiers, aggregation clauses).
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
             "and", "or", "unless"}


def _queries(doc: dict) -> list[str]:
    out = []

    def walk(panels: list[dict]) -> None:
        for p in panels:
            out.extend(t["expr"] for t in p.get("targets", []))
            walk(p.get("panels", []))

    walk(doc["panels"])
    for var in doc["templating"]["list"]:
        q = var.get("query")
        if isinstance(q, dict):
            out.append(q["query"])
    return out


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or ``label_values(metric, label)``) reads."""
    m = re.fullmatch(r"\s*label_values\(\s*([A-Za-z_:][\w:]*)\s*,\s*\w+\s*\)\s*", expr)
    if m:
        return {m.group(1)}
    s = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)          # strings
    s = re.sub(r"\{[^}]*\}", "", s)                       # label matchers
    s = re.sub(r"\[[^\]]*\]", "", s)                      # range and subquery durations
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", s)
    names = set()
    for tok in re.finditer(r"[A-Za-z_:][\w:]*", s):
        rest = s[tok.end():].lstrip()
        if rest.startswith("(") or tok.group() in _KEYWORDS:
            continue  # a function or a keyword
        names.add(tok.group())
    return names


def test_metric_names_are_read_from_promql():
    assert metric_names('time() - max by (channel) (a_b{x="y}"}) + rate(c_total[5m]) '
                        'and on (i) d') == {"a_b", "c_total", "d"}
    assert metric_names("label_values(gateway_raft_is_leader, job)") == {
        "gateway_raft_is_leader"}


def test_every_metric_the_grafana_dashboard_queries_is_exported_by_a_node(tmp_path):
    doc = json.loads(DASHBOARD.read_text())
    wanted = set().union(*(metric_names(q) for q in _queries(doc)))
    assert {"gateway_channel_lag_seconds", "gateway_channel_replicated_time_seconds",
            "gateway_conflict", "gateway_applier_dead_letters",
            "gateway_applier_lag_seconds"} <= wanted  # the dashboard shows what it must

    a = node_configs(tmp_path / "a", 1, cluster_id=1)[0]
    b = node_configs(tmp_path / "b", 1, cluster_id=2,
                     appliers={"sqlite": {"path": str(tmp_path / "sink.db")}})[0]
    b = dataclasses.replace(b, channels=(ChannelConfig("fromA", (a.api,)),))

    async def go() -> str:
        async with running(a, b) as (na, nb):
            await leader_of([na])
            await leader_of([nb])
            async with AsyncGatewayClient(b.api) as cb:
                await cb.set_conflict_rule("other.*", "NDB$MAX(ts)")
            async with AsyncGatewayClient(a.api) as ca:
                await ca.write([row_insert("shop.items", {"id": 1}, {"v": "x"})])
            await wait_for(lambda: any(c.replicated_time_ns for c in nb.status().channels), 30,
                           "replicated")
            reg = CollectorRegistry()
            reg.register(NodeCollector(nb))
            port = free_ports(1)[0]
            server, thread = start_http_server(port, addr="127.0.0.1", registry=reg)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                            timeout=10) as r:
                    return r.read().decode()
            finally:
                server.shutdown()
                server.server_close()
                thread.join(5)

    text = run(go(), 90)
    exported = {line.split("{", 1)[0].split(" ", 1)[0] for line in text.splitlines()
                if line and not line.startswith("#")}
    missing = sorted(wanted - exported)
    assert not missing, f"deploy/grafana/gateway.json queries metrics no node exports: {missing}"
