"""The replicated key-value state machine of the simulator, with client sessions so that a
duplicated or retried proposal is applied at most once."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

PUT = "put"
GET = "get"
CAS = "cas"


def encode_op(client: int, seq: int, kind: str, key: str, value: str | None = None,
              expected: str | None = None) -> bytes:
    return json.dumps([client, seq, kind, key, value, expected], separators=(",", ":")).encode()


@dataclass(slots=True)
class KVStore:
    data: dict[str, str] = field(default_factory=dict)
    # client -> (last applied seq, its result)
    sessions: dict[int, tuple[int, object]] = field(default_factory=dict)

    def apply(self, payload: bytes) -> tuple[int, int, object] | None:
        """Apply one entry; returns (client, seq, result) or None for no-ops. An entry whose
        seq is not newer than the client's session is not applied again."""
        if not payload:
            return None
        client, seq, kind, key, value, expected = json.loads(payload)
        last = self.sessions.get(client)
        if last is not None and seq <= last[0]:
            return (client, seq, last[1]) if seq == last[0] else None
        if kind == PUT:
            self.data[key] = value
            result: object = None
        elif kind == GET:
            result = self.data.get(key)
        else:
            ok = self.data.get(key) == expected
            if ok:
                self.data[key] = value
            result = ok
        self.sessions[client] = (seq, result)
        return client, seq, result

    def get(self, key: str) -> str | None:
        return self.data.get(key)

    def snapshot(self) -> bytes:
        sessions = {str(c): [s, r] for c, (s, r) in self.sessions.items()}
        return json.dumps([self.data, sessions], sort_keys=True).encode()

    @classmethod
    def restore(cls, blob: bytes) -> KVStore:
        if not blob:
            return cls()
        data, sessions = json.loads(blob)
        return cls(dict(data), {int(c): (s, r) for c, (s, r) in sessions.items()})
