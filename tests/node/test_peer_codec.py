"""The peer stream's MessageBatch bytes (gateway.node.peers.peer_codec): the C writer gives
protobuf's bytes, the C reader gives what protobuf's parse and ``from_proto`` give -- or hands
the bytes to them (a chunk, an unknown field or type, bad text, damage) -- and a batch read
back is the batch written."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.frame import decode_frame, encode_frame
from gateway.node.peers import peer_codec
from gateway.node.peers.peer_stream import BATCH_TAG
from gateway.raft import (
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    SnapshotChunk,
    SnapshotMetadata,
)
from gateway.v1 import peer_pb2
from tests.harness.debug_alloc import run_under_debug_allocator

if os.environ.get("GATEWAY_REQUIRE_ACCEL") == "1":  # CI: the extension must be built
    from gateway.node import _peer_codec as wire
else:
    wire = pytest.importorskip("gateway.node._peer_codec")

_U64 = st.integers(0, 2**64 - 1) | st.sampled_from([0, 1, 127, 128, 2**63])
_ENTRIES = st.lists(st.builds(Entry, _U64, _U64, st.sampled_from(list(EntryType)),
                              st.binary(max_size=40)), max_size=4)
_CHUNK = st.builds(lambda v, i, t, o, d: SnapshotChunk(
    SnapshotMetadata(ConfState(voters=tuple(v), auto_leave=bool(o % 2)), i, t), o, len(d) + o,
    d), st.lists(_U64, max_size=3), _U64, _U64, st.integers(0, 2**40), st.binary(max_size=20))
_MESSAGES = st.builds(
    lambda ty, to, fr, term, lt, ix, ents, commit, chunk, rej, hint, ctx, lease: Message(
        ty, to, fr, term, lt, ix, ents, commit, None, chunk, rej, hint, ctx, lease),
    st.sampled_from(list(MessageType)), _U64, _U64, _U64, _U64, _U64, _ENTRIES, _U64,
    st.none() | st.none() | _CHUNK, st.booleans(), _U64, st.binary(max_size=12), _U64)
_BATCHES = st.tuples(_U64, st.text(max_size=12), st.text(max_size=12),
                     st.lists(_MESSAGES, max_size=4))


@settings(max_examples=200, deadline=None)
@given(_BATCHES, st.integers(0, 255))
def test_framed_batches_written_in_c_are_the_frame_of_protobufs_bytes(batch, tag):
    sender, api, peer, msgs = batch
    want = encode_frame(tag, peer_codec.encode_batch_py(sender, api, peer, msgs))
    got = wire.encode_batch(peer_codec._KEYS, sender, api, peer, msgs, tag)
    if any(m.chunk is not None for m in msgs):
        assert got is None
    else:
        assert got == want
    assert peer_codec.encode_frame_batch(tag, sender, api, peer, msgs) == want
    assert peer_codec.encode_frame_batch_py(tag, sender, api, peer, msgs) == want


@pytest.mark.parametrize("sizes", [[], [0], [1], [100], [300], [70_000], [2_000, 90_000, 5]])
def test_framed_batches_take_every_length_form(sizes):
    """Frames of empty, one-byte-length, two-byte-length and four-byte-length batches: the C
    frame equals ``encode_frame`` of the specification's batch and decodes back."""
    msgs = [Message(MessageType.APP, 2, 1, 3, 2, 9,
                    [Entry(3, 10 + i, EntryType.NORMAL, bytes([i % 256]) * n)
                     for i, n in enumerate(sizes)], 8)] if sizes else []
    for sender, api in ((0, ""), (1, "127.0.0.1:7070")):
        want = encode_frame(BATCH_TAG, peer_codec.encode_batch_py(sender, api, "", msgs))
        got = peer_codec.encode_frame_batch(BATCH_TAG, sender, api, "", msgs)
        assert got == want
        tag, message, end = decode_frame(got)
        assert (tag, end) == (BATCH_TAG, len(got))
        assert peer_codec.decode_batch(message) == peer_codec.PeerBatch(sender, api, "", msgs)


@settings(max_examples=400, deadline=None)
@given(_BATCHES)
def test_batches_written_in_c_are_protobufs_bytes_and_read_back_alike(batch):
    sender, api, peer, msgs = batch
    want = peer_codec.encode_batch_py(sender, api, peer, msgs)
    got = wire.encode_batch(peer_codec._KEYS, sender, api, peer, msgs)
    if any(m.chunk is not None for m in msgs):
        assert got is None  # the specification writes chunks
    else:
        assert got == want
    assert peer_codec.encode_batch(sender, api, peer, msgs) == want
    back = peer_codec.decode_batch(want)
    assert back == peer_codec.decode_batch_py(want)
    assert back == peer_codec.PeerBatch(sender, api, peer, msgs)


def test_a_message_type_this_version_does_not_know_is_the_specifications_error():
    pm = peer_codec.to_proto(Message(MessageType.APP, 2, 1, 3, entries=[Entry(3, 4)]))
    pm.type = 99
    data = peer_pb2.MessageBatch(messages=[pm]).SerializeToString()
    assert wire.decode_batch(peer_codec._KEYS, data, Message, peer_codec._MTYPES, Entry,
                             peer_codec._ETYPES) is None
    with pytest.raises(ValueError):
        peer_codec.decode_batch(data)


def _spec(data: bytes):  # type: ignore[no-untyped-def]
    try:
        return peer_codec.decode_batch_py(data)
    except Exception as exc:  # DecodeError, ValueError
        return type(exc)


@settings(max_examples=600, deadline=None)
@given(_BATCHES, st.data())
def test_damaged_batches_read_in_c_are_what_protobuf_reads_or_handed_to_it(batch, data_st):
    sender, api, peer, msgs = batch
    data = bytearray(peer_codec.encode_batch_py(sender, api, peer, msgs))
    for _ in range(data_st.draw(st.integers(1, 4))):
        if not data:
            break
        i = data_st.draw(st.integers(0, len(data) - 1))
        data[i] = data_st.draw(st.sampled_from([0x00, 0x01, 0x08, 0x0A, 0x3A, 0x80, 0xFF,
                                                0x7F, 0xC3]))
    cut = data_st.draw(st.integers(0, len(data)))
    for blob in (bytes(data), bytes(data[:cut]), bytes(data) + b"\x7a\x01x"):
        got = wire.decode_batch(peer_codec._KEYS, blob, Message, peer_codec._MTYPES, Entry,
                                peer_codec._ETYPES)
        spec = _spec(blob)
        if got is not None:
            assert peer_codec.PeerBatch(*got) == spec
        if isinstance(spec, type):
            with pytest.raises(spec):
                peer_codec.decode_batch(blob)
        else:
            assert peer_codec.decode_batch(blob) == spec


def test_codec_entry_points_refuse_wrong_keys():
    with pytest.raises(ValueError):
        wire.encode_batch(b"\x08", 1, "", "", [])
    with pytest.raises(ValueError):
        wire.decode_batch(b"\x08", b"", Message, {}, Entry, (EntryType.NORMAL,
                                                            EntryType.CONF_CHANGE))


# The caller's lists emptied by a property of a message or an entry in the middle of the call:
# the object being read must stay alive and nothing is read from the emptied list. Run in a
# child: before the fix the C code read the freed message or entry.
_LISTS_EMPTIED_BY_A_PROPERTY = """
from gateway.node import _peer_codec
from gateway.node.peers import peer_codec

class Msg:
    to = from_ = term = log_term = index = commit = reject_hint = lease = 1
    type, chunk, reject, context = 3, None, False, b""
    def __init__(self, entries):
        self.entries = entries

class Emptying(Msg):
    @property
    def type(self):
        msgs.clear()
        return 3

class Ent:
    index, type, data = 1, 0, b"x"
    def __init__(self, owner):
        self.owner = owner
    @property
    def term(self):
        self.owner.clear()
        return 1

msgs = [Emptying([]) for _ in range(3)]  # the list holds the only reference of each
print("messages:", _peer_codec.encode_batch(peer_codec._KEYS, 1, "", "", msgs))
ents = []
ents += [Ent(ents) for _ in range(3)]
got = _peer_codec.encode_batch(peer_codec._KEYS, 1, "", "", [Msg(ents)])
print("entries:", type(got).__name__)
"""


def test_lists_changed_by_a_property_are_not_read_after_free():
    out = run_under_debug_allocator(_LISTS_EMPTIED_BY_A_PROPERTY)
    # a message list that changed: the general path; an entry list that shrank: what is left
    assert out.splitlines() == ["messages: None", "entries: bytes"], out
