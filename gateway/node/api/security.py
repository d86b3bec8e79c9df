"""Security of a node: TLS credentials, bearer tokens, and a test CA helper.

- Public API: TLS with ``tls.api_cert``/``tls.api_key`` (optionally client certificates
  checked against ``tls.api_client_ca``).
- Peers: mutual TLS; a node serves ``Peer`` with ``tls.peer_cert``/``tls.peer_key`` and
  *requires* a client certificate signed by ``tls.peer_ca``, and dials peers presenting its
  certificate and trusting only ``tls.peer_ca``. A node with a certificate from another CA
  cannot connect, so it cannot join.
- Tokens: with ``tokens_file`` set, every public call needs ``authorization: Bearer TOKEN``
  metadata for a token holding the method's permission (``read``: Read, Scan, Subscribe,
  Status, ``Reads.ReadBatch``; ``write``: Write, WriteBatch, StreamWrite; ``admin``: AddNode,
  RemoveNode, TransferLeader, Snapshot, Alarm, Status; ``ChannelSource.Stream``, the channel
  protocol, needs what Subscribe needs). The tokens file is TOML::

      [[token]]
      name = "app"            # for logs
      token = "s3cret"        # or sha256 = "<hex digest of the token>"
      permissions = ["read", "write"]

  Missing or unknown token: UNAUTHENTICATED; known token without the permission:
  PERMISSION_DENIED. Health checks and reflection need no token.
- Forwarded calls: a follower forwards a write or an admin call to the leader over
  ``Peer.Forward`` with the caller's ``authorization`` metadata, and the leader checks it with
  :func:`authorize` exactly as its own API would (same method, same permissions): the peer
  port is no way around the tokens.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import ipaddress
import os
import ssl
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NoReturn, TypeVar

import grpc

from gateway.node.api.call_context import CallContext, Metadatum
from gateway.node.base.config import ConfigError, NodeConfig

__all__ = ["PERMISSIONS", "AuthError", "TokenAuthInterceptor", "Tokens",
           "api_server_credentials", "authorize", "bearer_metadata", "load_tokens",
           "make_test_ca", "peer_channel_credentials", "peer_server_credentials",
           "peer_ssl_contexts", "token_permissions"]

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")

PERMISSIONS = ("read", "write", "admin")
_SERVICE = "/gateway.v1.Gateway/"
#: The channel protocol's service: its methods are named ``ChannelSource.METHOD`` here.
_CHANNEL_SERVICE = "/gateway.v1.ChannelSource/"
#: Reads of many rows: its methods are named ``Reads.METHOD`` here.
_READS_SERVICE = "/gateway.v1.Reads/"
_NEEDS: dict[str, frozenset[str]] = {
    "Read": frozenset({"read"}), "Scan": frozenset({"read"}), "Subscribe": frozenset({"read"}),
    "Status": frozenset({"read", "admin"}),
    "Write": frozenset({"write"}), "WriteBatch": frozenset({"write"}),
    "StreamWrite": frozenset({"write"}),
    "AddNode": frozenset({"admin"}), "RemoveNode": frozenset({"admin"}),
    "TransferLeader": frozenset({"admin"}), "Snapshot": frozenset({"admin"}),
    "Alarm": frozenset({"admin"}),
    "ConflictsList": frozenset({"read"}), "DeadLetters": frozenset({"read"}),
    "ConflictsReplay": frozenset({"admin"}), "DeadLetterAction": frozenset({"admin"}),
}
#: A channel session reads what Subscribe reads: the same permission.
_NEEDS["ChannelSource.Stream"] = _NEEDS["Subscribe"]
#: The schema service (``schema_service``): its methods are named ``Schema.METHOD`` here.
_SCHEMA_SERVICE = "/gateway.v1.Schema/"
_NEEDS["Schema.ChangeSchema"] = frozenset({"admin"})
_NEEDS["Schema.ShowTable"] = _NEEDS["Schema.SchemaHistory"] = frozenset({"read", "admin"})
#: A read of many rows needs what a read of one needs.
_NEEDS["Reads.ReadBatch"] = _NEEDS["Read"]


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def api_server_credentials(cfg: NodeConfig) -> grpc.ServerCredentials | None:
    """TLS credentials of the public API, or ``None`` for plaintext."""
    t = cfg.tls
    if not t.api_enabled:
        return None
    ca = _read(t.api_client_ca) if t.api_client_ca else None
    return grpc.ssl_server_credentials([(_read(t.api_key), _read(t.api_cert))],
                                       root_certificates=ca, require_client_auth=ca is not None)


def peer_server_credentials(cfg: NodeConfig) -> grpc.ServerCredentials | None:
    """Mutual-TLS credentials of the ``Peer`` service, or ``None`` for plaintext."""
    t = cfg.tls
    if not t.peer_enabled:
        return None
    return grpc.ssl_server_credentials([(_read(t.peer_key), _read(t.peer_cert))],
                                       root_certificates=_read(t.peer_ca),
                                       require_client_auth=True)


def peer_channel_credentials(cfg: NodeConfig) -> grpc.ChannelCredentials | None:
    """Credentials for dialing peers (our certificate, trusting only the peer CA)."""
    t = cfg.tls
    if not t.peer_enabled:
        return None
    return grpc.ssl_channel_credentials(root_certificates=_read(t.peer_ca),
                                        private_key=_read(t.peer_key),
                                        certificate_chain=_read(t.peer_cert))


#: The ALPN protocol of the framed peer stream over TLS.
PEER_ALPN = "gwraft1"


def peer_ssl_contexts(cfg: NodeConfig) -> tuple[ssl.SSLContext, ssl.SSLContext] | None:
    """``(server, client)`` TLS contexts of the framed peer stream and the peer port's
    listener (``gateway.node.peers.peer_stream``), or ``None`` for plaintext: the same mutual TLS
    as the gRPC peer credentials -- our certificate, only ``peer_ca`` trusted, client
    certificates required. ALPN: both offer :data:`PEER_ALPN` first, then ``h2``; our
    listener selects ``gwraft1`` for our dialers and ``h2`` for gRPC clients, and an older
    node's gRPC server selects ``h2`` -- how a dialer knows, behind TLS, that the peer does
    not speak the framed stream."""
    t = cfg.tls
    if not t.peer_enabled:
        return None
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=t.peer_ca)
    server.load_cert_chain(t.peer_cert, t.peer_key)
    server.verify_mode = ssl.CERT_REQUIRED
    server.set_alpn_protocols([PEER_ALPN, "h2"])
    client = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=t.peer_ca)
    client.load_cert_chain(t.peer_cert, t.peer_key)
    client.set_alpn_protocols([PEER_ALPN, "h2"])
    return server, client


# -- tokens -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Token:
    name: str
    digest: bytes
    permissions: frozenset[str]


class Tokens:
    """Bearer tokens and their permissions (compared by SHA-256 digest, in constant time)."""

    def __init__(self, tokens: Sequence[_Token]) -> None:
        self._tokens = list(tokens)

    def lookup(self, token: str) -> _Token | None:
        digest = hashlib.sha256(token.encode()).digest()
        found = None
        for t in self._tokens:
            if hmac.compare_digest(t.digest, digest):
                found = t
        return found


def load_tokens(path: str) -> Tokens:
    """Parse a tokens file (see the module docstring); raises ``ConfigError``."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"tokens_file: {path}: {exc}") from None
    out = []
    for i, item in enumerate(doc.get("token", [])):
        where = f"tokens_file: {path}: token[{i}]"
        perms = item.get("permissions", [])
        bad = [p for p in perms if p not in PERMISSIONS]
        if bad or not perms:
            raise ConfigError(f"{where}.permissions: expected some of {', '.join(PERMISSIONS)}")
        if "token" in item:
            digest = hashlib.sha256(str(item["token"]).encode()).digest()
        elif "sha256" in item:
            try:
                digest = bytes.fromhex(str(item["sha256"]))
            except ValueError:
                raise ConfigError(f"{where}.sha256: not a hex digest") from None
        else:
            raise ConfigError(f"{where}: needs token or sha256")
        out.append(_Token(str(item.get("name", f"token{i}")), digest, frozenset(perms)))
    if not out:
        raise ConfigError(f"tokens_file: {path}: no [[token]] entries")
    return Tokens(out)


class AuthError(Exception):
    """A call refused by :func:`authorize`: ``code`` is UNAUTHENTICATED or PERMISSION_DENIED,
    ``str()`` the one-line detail the caller sees."""

    def __init__(self, code: grpc.StatusCode, detail: str) -> None:
        self.code = code
        super().__init__(detail)


def bearer_metadata(metadata: Iterable[Metadatum] | None) -> tuple[tuple[str, str], ...]:
    """The ``authorization`` entries of ``metadata`` (what a forwarded call carries on)."""
    return tuple((k, v) for k, v in metadata or () if k == "authorization" and isinstance(v, str))


def token_permissions(tokens: Tokens | None, metadata: Iterable[Metadatum] | None
                      ) -> frozenset[str]:
    """The permissions of the bearer token in ``metadata`` (none for a missing or unknown
    token); every permission when ``tokens`` is None (a node without tokens checks none)."""
    if tokens is None:
        return frozenset(PERMISSIONS)
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str) and value.startswith("Bearer "):
            found = tokens.lookup(value[7:].strip())
            return found.permissions if found is not None else frozenset()
    return frozenset()


def authorize(tokens: Tokens, method: str, metadata: Iterable[Metadatum] | None
              ) -> frozenset[str]:
    """The permissions of the bearer token in ``metadata`` when it may call ``Gateway``
    method ``method`` (its name alone, e.g. ``"Write"``; an unknown method needs ``admin``);
    raises :class:`AuthError` otherwise. The one check of the API interceptor and of calls
    forwarded over the peer port."""
    needs = _NEEDS.get(method, frozenset({"admin"}))
    token = ""
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str) and value.startswith("Bearer "):
            token = value[7:].strip()
    if not token:
        raise AuthError(grpc.StatusCode.UNAUTHENTICATED,
                        "missing bearer token (authorization: Bearer TOKEN)")
    found = tokens.lookup(token)
    if found is None:
        raise AuthError(grpc.StatusCode.UNAUTHENTICATED, "unknown bearer token")
    if not needs & found.permissions:
        raise AuthError(grpc.StatusCode.PERMISSION_DENIED,
                        f"token {found.name!r} lacks the {'/'.join(sorted(needs))} "
                        f"permission for {method}")
    return found.permissions


def _deny(code: grpc.StatusCode, detail: str, handler: grpc.RpcMethodHandler[_Req, _Resp]
          ) -> grpc.RpcMethodHandler[_Req, _Resp]:
    async def abort_unary(_request: object, context: CallContext) -> NoReturn:
        await context.abort(code, detail)

    async def abort_stream(_request: object, context: CallContext) -> AsyncIterator[NoReturn]:
        await context.abort(code, detail)
        yield  # pragma: no cover - makes this an async generator

    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(abort_stream)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(abort_unary)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(abort_stream)
    return grpc.unary_unary_rpc_method_handler(abort_unary)


class TokenAuthInterceptor(grpc.aio.ServerInterceptor):
    """Checks bearer tokens on ``gateway.v1.Gateway``, ``gateway.v1.Reads``,
    ``gateway.v1.ChannelSource`` and ``gateway.v1.Schema`` methods (others pass)."""

    def __init__(self, tokens: Tokens) -> None:
        self._tokens = tokens

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails],
                                     Awaitable[grpc.RpcMethodHandler[_Req, _Resp] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[_Req, _Resp] | None:
        method = handler_call_details.method
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        if method.startswith(_SERVICE):
            name = method[len(_SERVICE):]
        elif method.startswith(_CHANNEL_SERVICE):
            name = "ChannelSource." + method[len(_CHANNEL_SERVICE):]
        elif method.startswith(_SCHEMA_SERVICE):
            name = "Schema." + method[len(_SCHEMA_SERVICE):]
        elif method.startswith(_READS_SERVICE):
            name = "Reads." + method[len(_READS_SERVICE):]
        else:
            return handler
        try:
            authorize(self._tokens, name, handler_call_details.invocation_metadata)
        except AuthError as exc:
            return _deny(exc.code, str(exc), handler)
        return handler


# -- test CA ----------------------------------------------------------------------------------


def make_test_ca(directory: str, hosts: Sequence[str] = ("localhost", "127.0.0.1"),
                 names: Sequence[str] = ("node", "client")) -> dict[str, str]:
    """Create a throw-away CA in ``directory`` (``ca.pem``, ``ca.key``) and, for each name in
    ``names``, a key and certificate signed by it (``NAME.pem``, ``NAME.key``) valid for
    ``hosts`` as server and client. For tests and local clusters only. Returns the paths."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    os.makedirs(directory, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    valid = (now - datetime.timedelta(hours=1), now + datetime.timedelta(days=365))

    def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM,
                                 serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                            f"gateway test CA {os.urandom(4).hex()}")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(valid[0]).not_valid_after(valid[1])
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .sign(ca_key, hashes.SHA256()))
    paths: dict[str, str] = {}

    def write(name: str, data: bytes) -> str:
        path = os.path.join(directory, name)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o600 if name.endswith(".key") else 0o644)
        return path

    paths["ca"] = write("ca.pem", ca_cert.public_bytes(serialization.Encoding.PEM))
    paths["ca_key"] = write("ca.key", key_pem(ca_key))
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    for name in names:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                .issuer_name(ca_name).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(valid[0]).not_valid_after(valid[1])
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                      ExtendedKeyUsageOID.CLIENT_AUTH]),
                               critical=False)
                .sign(ca_key, hashes.SHA256()))
        paths[name] = write(f"{name}.pem", cert.public_bytes(serialization.Encoding.PEM))
        paths[f"{name}_key"] = write(f"{name}.key", key_pem(key))
    return paths
