"""The ``spark`` plugin (entry point ``spark = "spark_applier.plugin"`` of the gateway
distribution): adds ``gateway spark apply`` (``spark_applier.cli``) through
``gateway_register_commands``; the applier loop is ``spark_applier.runner``. Importing this
module does not import PySpark (every gateway command loads the installed plugins); the
command imports it when it runs.
"""

from __future__ import annotations

import click

from gateway import hookimpl

from .cli import spark_group

__all__ = ["gateway_register_commands"]


@hookimpl
def gateway_register_commands(cli: click.Group) -> None:
    """Add the ``spark`` command group (``gateway spark apply``)."""
    cli.add_command(spark_group)
