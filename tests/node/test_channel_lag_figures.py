"""``SourceWatch`` (replication/channel_lag.py): the figures from what a channel heard of its
source, on a clock the test sets."""

from __future__ import annotations

from gateway.node.replication.channel_lag import STALE_S, SourceWatch
from gateway.v1 import channel_pb2

S = 1_000_000_000


def _progress(epoch: int, sealed_s: float, sent_s: float) -> channel_pb2.SourceProgress:
    return channel_pb2.SourceProgress(epoch=epoch, sealed_at_ns=int(sealed_s * S),
                                      sent_at_ns=int(sent_s * S))


def test_lag_counts_from_the_oldest_epoch_not_applied_also_when_read_after_the_progress():
    w = SourceWatch()
    w.progress(_progress(10, 100, 101), now_ns=101 * S)  # clocks agree
    w.sealed(8, 90 * S)  # read from the stream after the progress named a newer one
    got = w.figures(applied=7, live=True, now_ns=102 * S)
    assert (got.source_epoch, got.lag_epochs, got.lag_seconds) == (10, 3, 12.0)
    assert not got.since_last_heard
    w.prune(8)
    assert w.figures(applied=8, live=True, now_ns=102 * S).lag_seconds == 2.0


def test_caught_up_the_lag_is_the_age_of_the_last_message():
    w = SourceWatch()
    w.progress(_progress(5, 50, 60), now_ns=60 * S)
    got = w.figures(applied=5, live=True, now_ns=int(60.5 * S))
    assert got.lag_epochs == 0 and got.lag_seconds == 0.5 and not got.since_last_heard


def test_silence_or_a_stopped_channel_marks_the_figures_and_they_keep_growing():
    w = SourceWatch()
    w.progress(_progress(5, 50, 60), now_ns=60 * S)
    late = w.figures(applied=5, live=True, now_ns=int((60 + STALE_S + 1) * S))
    assert late.since_last_heard and late.lag_seconds == STALE_S + 1
    paused = w.figures(applied=5, live=False, now_ns=61 * S)
    assert paused.since_last_heard
    assert SourceWatch().figures(applied=0, live=True, now_ns=S).since_last_heard


def test_the_source_clock_is_moved_by_the_smallest_offset_seen():
    w = SourceWatch()
    w.progress(_progress(3, 10, 10), now_ns=15 * S)  # source 5 s behind (+ delay)
    w.progress(_progress(3, 10, 11), now_ns=15 * S)  # a later message: offset 4 s
    got = w.figures(applied=2, live=True, now_ns=20 * S)
    assert got.lag_seconds == 6.0  # sealed at 10 source = 14 here
