"""Start-up warnings for a node reachable from other hosts without protection.

`exposure_warnings` looks at the addresses a node binds and its security settings and returns
one line per risk; the node logs each as a warning when it starts (docs/node.md, "Security"):

- the API on a non-loopback address with neither TLS (``tls.api_cert``) nor bearer tokens
  (``tokens_file``): anyone who reaches the port can write and read every row, and
  administer the cluster;
- the API on a non-loopback address with tokens but no TLS: tokens travel in clear text;
- peers on a non-loopback address without mutual TLS (allowed only with ``insecure_peer``:
  ``config.peer_port_problem``): anyone who reaches the port can inject Raft messages and
  snapshots;
- ``/metrics`` on a non-loopback address: it has no authentication (this is often what is
  wanted, for Prometheus; it is said once so that it is a choice).

A host name is treated as non-loopback unless it is ``localhost``; an unspecified address
(``0.0.0.0``, ``::``, empty host) is non-loopback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.node.base.addresses import is_loopback

if TYPE_CHECKING:
    from gateway.node.base.config import NodeConfig

__all__ = ["exposure_warnings", "is_loopback", "peer_port_mode"]


def exposure_warnings(cfg: NodeConfig) -> list[str]:
    """One line per way the node is reachable from other hosts without protection."""
    out = []
    if not is_loopback(cfg.api):
        if not cfg.tls.api_enabled and not cfg.tokens_file:
            out.append(
                f"api {cfg.api} is reachable from other hosts with NO TLS and NO tokens: anyone "
                f"who reaches it can read and write every row and administer the cluster; set "
                f"tls.api_cert/tls.api_key and tokens_file (docs/node.md, \"Security\") or bind "
                f"127.0.0.1")
        elif not cfg.tls.api_enabled:
            out.append(f"api {cfg.api} is reachable from other hosts without TLS: bearer tokens "
                       f"and rows travel in clear text; set tls.api_cert/tls.api_key")
        elif not cfg.tokens_file:
            out.append(f"api {cfg.api} is reachable from other hosts with TLS but no tokens: "
                       f"any client can write and administer; set tokens_file")
    if not is_loopback(cfg.listen) and not cfg.tls.peer_enabled:
        out.append(f"peer port {cfg.listen} is reachable from other hosts without mutual TLS "
                   f"(insecure_peer): anyone who reaches it can inject Raft messages and "
                   f"snapshots; set tls.peer_cert, tls.peer_key and tls.peer_ca")
    if cfg.metrics and not is_loopback(cfg.metrics):
        out.append(f"metrics {cfg.metrics} is reachable from other hosts (no authentication)")
    return out


def peer_port_mode(cfg: NodeConfig) -> str:
    """The one line a node logs at start about how its peer port is protected."""
    if cfg.tls.peer_enabled:
        return f"peer port {cfg.listen}: mutual TLS (peers need a certificate from tls.peer_ca)"
    if is_loopback(cfg.listen):
        return f"peer port {cfg.listen}: plaintext, loopback only"
    return f"peer port {cfg.listen}: PLAINTEXT, reachable from other hosts (insecure_peer)"
