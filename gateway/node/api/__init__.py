"""The public face: the gRPC service (``api``, ``api_handlers``, ``grpc_server``), TLS and
tokens (``security``), the HTTP exposure (``exposure``) and metrics and logs (``metrics``).
Imports the rooms below it; the node it serves only as a Protocol (``served_node``), never
``gateway.node.server``, which builds it."""
