"""Talking to the other nodes: the peer gRPC streams (``transport``, ``peer_stream``) and their
batch codec (``peer_codec``, Python twin of ``gateway/node/_peer_codec.c``). Imports only
``base``."""
