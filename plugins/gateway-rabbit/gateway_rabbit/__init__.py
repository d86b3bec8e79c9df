"""gateway-rabbit: the ``rabbit`` applier, publishing reduced row operations to RabbitMQ.

A Gateway plugin shipped as its own distribution and found through the ``gateway`` entry-point
group like any third-party plugin; it uses only Gateway's public API. Modules:
``message`` (routing key, body formats, headers, message id -- and ``decode_body`` for
consumers) and ``publisher`` (``RabbitApplier``: asyncio loop thread, robust connection,
batched publisher confirms). See README.md for the options and the message format.

Exceptions::

    ApplyError (gateway.appliers.contract)
    └── TransientApplyError
        ├── RabbitUnavailableError    broker unreachable, connection lost, confirm timeout
        ├── RabbitNackError           the broker nacked a message
        └── UnroutableMessageError    a mandatory message was returned (no queue bound)
    ApplierConfigError (ValueError)   bad ``-o`` options
    MessageFormatError (ValueError)   ``decode_body`` got something that is not an operation
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway import (
    SCOPE_CLUSTER,
    ApplierConfigError,
    ApplierFactory,
    hookimpl,
)

from .message import (
    CONTENT_TYPES,
    FORMATS,
    MessageFormatError,
    OutgoingMessage,
    decode_body,
    decode_schema_body,
    encode,
    encode_schema,
    message_id,
    op_from_json,
    op_json,
    routing_key,
    schema_json,
    schema_routing_key,
)
from .publisher import (
    RabbitApplier,
    RabbitNackError,
    RabbitSettings,
    RabbitUnavailableError,
    UnroutableMessageError,
)

__all__ = [
    "CONTENT_TYPES",
    "FORMATS",
    "OPTIONS",
    "RABBIT_FACTORY",
    "MessageFormatError",
    "OutgoingMessage",
    "RabbitApplier",
    "RabbitNackError",
    "RabbitSettings",
    "RabbitUnavailableError",
    "UnroutableMessageError",
    "decode_body",
    "decode_schema_body",
    "encode",
    "encode_schema",
    "message_id",
    "op_from_json",
    "op_json",
    "parse_options",
    "routing_key",
    "schema_json",
    "schema_routing_key",
]

#: Where the applier looks for the broker unless told (a local server, the default user).
DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"

OPTIONS: dict[str, str] = {
    "url": "broker URL, amqp://user:password@host:port/vhost "
           "[amqp://guest:guest@127.0.0.1:5672/]",
    "exchange": "topic exchange to publish to (durable) [gateway]",
    "format": "message body: frame (transport frame of a RowOperation) or json [frame]",
    "declare": "declare the exchange (true) or require that it exists (false) [true]",
    "max_batch": "operations per publish-and-confirm round [256]",
    "confirm_timeout": "seconds to wait for the confirms of a round [30]",
    "reconnect_timeout": "seconds apply waits for a lost connection to come back [60]",
    "reconnect_interval": "seconds between reconnection attempts [1]",
}


def _number(options: Mapping[str, str], name: str, default: float, *, integer: bool = False,
            minimum: float = 0.0) -> float:
    text = options.get(name)
    if text is None or text == "":
        return default
    try:
        value: float = int(text) if integer else float(text)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise ApplierConfigError(f"applier 'rabbit': option {name}={text!r} is not {kind}"
                                 ) from None
    if value < minimum:
        raise ApplierConfigError(f"applier 'rabbit': option {name} must be >= {minimum:g}")
    return value


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = options.get(name, "").strip().lower()
    if not text:
        return default
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ApplierConfigError(f"applier 'rabbit': option {name}={text!r} is not true or false")


def parse_options(options: Mapping[str, str]) -> RabbitSettings:
    """``RabbitSettings`` from ``-o`` options; raises ``ApplierConfigError`` (one line)."""
    url = options.get("url") or DEFAULT_URL
    if not url.startswith(("amqp://", "amqps://")):
        raise ApplierConfigError(f"applier 'rabbit': url {url!r} is not amqp:// or amqps://")
    fmt = options.get("format") or "frame"
    if fmt not in FORMATS:
        raise ApplierConfigError(f"applier 'rabbit': format {fmt!r} is not frame or json")
    exchange = options.get("exchange", "gateway")
    if not exchange:
        raise ApplierConfigError("applier 'rabbit': the default exchange cannot route by "
                                 "topic; name an exchange")
    return RabbitSettings(
        url=url, exchange=exchange, format=fmt, declare=_flag(options, "declare", True),
        max_batch=int(_number(options, "max_batch", 256, integer=True, minimum=1)),
        confirm_timeout=_number(options, "confirm_timeout", 30.0, minimum=0.1),
        reconnect_timeout=_number(options, "reconnect_timeout", 60.0, minimum=0.1),
        reconnect_interval=_number(options, "reconnect_interval", 1.0, minimum=0.05))


def _create(options: Mapping[str, str]) -> RabbitApplier:
    return RabbitApplier(parse_options(options))


#: One shared exchange: in a gateway cluster only the leader publishes (scope ``cluster``),
#: so each change is published once, not once per node.
RABBIT_FACTORY = ApplierFactory(
    "rabbit", _create, "publish reduced row operations to a RabbitMQ topic exchange",
    OPTIONS, scope=SCOPE_CLUSTER)


@hookimpl
def gateway_register_appliers() -> list[ApplierFactory]:
    return [RABBIT_FACTORY]
