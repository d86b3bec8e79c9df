"""Whether an address binds only a loopback interface (pure; used by the configuration's
checks and the start-up exposure warnings).

A host name is treated as non-loopback unless it is ``localhost``; an unspecified address
(``0.0.0.0``, ``::``, empty host) is non-loopback.
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def _host(address: str) -> str:
    host = address.rpartition(":")[0] if ":" in address else address
    return host.strip("[]")


def is_loopback(address: str) -> bool:
    """True if ``HOST:PORT`` binds only a loopback interface."""
    host = _host(address)
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name, or an empty host (all interfaces)
