"""Generated protobuf code for the ``gateway.v1`` log model (sources in ``proto/gateway/v1``).

Do not edit the ``*_pb2.py`` / ``*_pb2.pyi`` files: run ``python3 scripts/gen_proto.py``.
The model is described in docs/log-model.md; type tags live in ``gateway.core.messages``.
"""
