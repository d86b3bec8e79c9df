"""What every room of the node uses: the error tree (``errors``), the configuration
(``config``, ``addresses``) and the request checks (``validation``, ``InvalidRequest``).
Imports nothing of the node's other rooms."""
