"""``python -m gateway.cli``: the ``gateway`` command (test harnesses run nodes this way)."""

from gateway.cli import main

main()
