"""The ``gateway`` command line.

Subcommand groups live in their own modules and are attached here; each command reports bad
input as a one-line error on stderr with exit code 2 (``click.UsageError`` style), never a
traceback.
"""

from __future__ import annotations

import click

from gateway import __version__

# isort: split
# First: sets grpcio's environment before anything below imports grpc (its module docstring).
from . import grpc_env  # noqa: F401

# isort: split
from . import appliers as cli_appliers
from . import node as cli_node
from . import plugins as cli_plugins
from .alarm import alarm
from .channel import channel
from .conflicts import conflicts
from .console import console
from .log import log
from .schema import schema
from .store import store


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gateway")
def main() -> None:
    """Gateway: multi-master replication gateway for heterogeneous stores."""


main.add_command(log)
main.add_command(store)
main.add_command(channel)
main.add_command(conflicts)
main.add_command(alarm)
main.add_command(console)
main.add_command(schema)
cli_plugins.attach(main)  # --plugins A,B, `gateway plugins`, plugin subcommands
cli_appliers.attach(main)  # `gateway apply`, `gateway deadletter`
cli_node.attach(main)  # `gateway run`, `sql`, `get`, `status`, `cluster`, `certs`


if __name__ == "__main__":  # pragma: no cover
    main()
