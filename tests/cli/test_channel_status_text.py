"""``gateway status`` text for channels: state, lag in epochs and seconds (marked when grown
from the last time the source was heard from), replicated time, and the leader's figures on
a follower."""

from __future__ import annotations

import time

from gateway.cli.node import channel_lines
from gateway.v1 import gateway_pb2


def _ch(**kw) -> gateway_pb2.ChannelStatus:
    return gateway_pb2.ChannelStatus(name="fromA", sources=["a:1"], source_id=1, **kw)


def test_a_running_channel_shows_lag_and_replicated_time():
    lines = channel_lines([_ch(state="running", applied_epoch=7, lag_epochs=2,
                               lag_seconds=1.25, replicated_time_ns=1_700_000_000_123_000_000)])
    assert "running" in lines[0] and "lag 2 epochs (1.250s)" in lines[0]
    assert "since last heard" not in lines[0]
    assert lines[1] == "    replicated time 2023-11-14T22:13:20.123Z"


def test_a_paused_channel_s_lag_is_marked_since_last_heard():
    heard = time.time_ns() - 30_000_000_000
    lines = channel_lines([_ch(state="paused", lag_epochs=4, lag_seconds=31.5,
                               since_last_heard=True, last_heard_ns=heard)])
    assert "paused" in lines[0] and "lag 4 epochs (31.500s) since last heard 30." in lines[0]
    assert lines[1] == "    replicated time none yet"
    never = channel_lines([_ch(state="connecting", since_last_heard=True)])
    assert "(source never heard from)" in never[0]


def test_a_follower_shows_the_leader_s_figures_or_where_they_are():
    got = channel_lines([_ch(state="running", lag_epochs=0, leader_id=3)])
    assert "running" in got[0] and "(from leader 3)" in got[0]
    away = channel_lines([_ch(state="on the leader 3")])
    assert "on the leader 3" in away[0] and " lag " not in away[0]
