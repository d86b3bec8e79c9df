"""The public face: the gRPC service (``api``, ``api_handlers``, ``grpc_server``), TLS and
tokens (``security``), the HTTP exposure (``exposure``) and metrics and logs (``metrics``).
Imports ``base``, ``storage``, ``state`` and ``loop``; the node it serves
(``gateway.node.server``) only for types."""
