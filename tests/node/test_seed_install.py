"""The replica side of a seed (``seed_apply``): chunks installed through the log are
idempotent and resumable, the rows keep their origin's metadata with this cluster's epoch,
and the end leaves the replication state as if the replica had replicated from the start."""

from __future__ import annotations

from gateway.core import messages
from gateway.node.replication.seed_source import read_chunk, seed_end
from gateway.node.state.state_machine import StoreStateMachine
from gateway.v1 import channel_pb2, epoch_pb2, gateway_pb2, replication_pb2, value_pb2
from tests.node.test_seed_source import E1, E2, _delete, _insert, _update, apply, marker, pin, txn

LOCAL = (7 << 32) | 3  # the replica's epoch stamped on the seed's entries


def step(**kw) -> bytes:
    return messages.pack(channel_pb2.SeedInstall(channel="fromA", source_id=1, **kw))


def source(tmp_path) -> StoreStateMachine:
    """Cluster 1 with 12 rows (one deleted), a row of cluster 3 it replicated, apply status
    and watermarks, pinned as seed 5 at E1."""
    sm = StoreStateMachine(str(tmp_path / "src"), cluster_id=1)
    apply(sm, txn(1, E1, *[_insert(k, f"v{k}") for k in range(12)]), txn(2, E1, _delete(3)))
    unit = replication_pb2.ReplicatedEpoch(
        channel="from3", source_id=3, source_epoch=40, local_epoch=E1, segment_id=1,
        end_segment=True, items=[
            replication_pb2.ReplicatedItem(transaction=_t3()),
            replication_pb2.ReplicatedItem(apply_status=epoch_pb2.ApplyStatus(
                server_id=1, epoch=E1 - 1, applied_by=3))])
    apply(sm, messages.pack(unit), marker(E1, 2), pin(5))
    apply(sm, txn(3, E2, _update(1, "later")))  # after the pin: not in the seed
    return sm


def _t3():
    from gateway.v1 import gtid_pb2, transaction_pb2
    return transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=3, trans_id=77), epoch=40, author=3,
        start_timestamp_ns=5, commit_timestamp_ns=5, segment_id=1, end_segment=True,
        statements=[_insert(100, "from 3")])


def chunks(src: StoreStateMachine, max_rows: int = 4) -> list[channel_pb2.SeedChunk]:
    snap = src.seed_pins.get(5).snapshot
    out, after = [], b""
    while (c := read_chunk(snap, 5, after, len(out) + 1, max_rows=max_rows)) is not None:
        out.append(c)
        after = c.last_key
    return out


def begin() -> channel_pb2.SeedStart:
    return channel_pb2.SeedStart(seed_id=5, epoch=E1, source_log_index=9, source_id=1)


def row(sm: StoreStateMachine, k: int) -> gateway_pb2.Row | None:
    return sm.get_row("s", "t", [value_pb2.Value(int_value=k)])


def install(sm: StoreStateMachine, src: StoreStateMachine, cs: list[channel_pb2.SeedChunk]
            ) -> None:
    for c in cs:
        apply(sm, step(chunk=c, local_epoch=LOCAL))
    # the reader sends the count the replica installed (a resume re-counts from there)
    end = seed_end(src.seed_pins.get(5).snapshot, 5, E1, 1, sm.seeds["fromA"].chunk.chunk_no)
    apply(sm, step(end=end))


def test_a_seed_installs_rows_with_their_origin_metadata_and_this_clusters_epoch(tmp_path):
    src = source(tmp_path)
    sm = StoreStateMachine(str(tmp_path / "dst"), cluster_id=2)
    apply(sm, step(request=True), step(begin=begin()))
    cs = chunks(src)
    install(sm, src, cs)
    assert "fromA" not in sm.seeds
    for k in (0, 1, 2, 4, 11):
        got, want = row(sm, k), row(src, k) if k != 1 else None
        assert got is not None
        assert got.values[0].string_value == f"v{k}"  # row 1 as of E1, not "later"
        assert got.epoch == LOCAL and got.author == 1
        assert (got.gtid.server_id, got.gtid.trans_id) == (1, 1)
        if want is not None:
            assert got.commit_timestamp_ns == want.commit_timestamp_ns
        v = sm.store.get_version(_key(k))
        assert (v.epoch, v.author, v.commit_ts) == (LOCAL, 1, 1001)
    assert row(sm, 3) is None
    dead = sm.store.get_version(_key(3))
    assert dead is not None and dead.value is None and dead.author == 1
    r100 = row(sm, 100)
    assert r100 is not None and r100.author == 3 and r100.gtid.trans_id == 77
    assert "s.t" in sm.schemas
    rep = sm.replication
    assert rep.held(1) == E1                      # the channel continues after E1
    assert rep.held(3) == 40                      # it holds what the source held of 3
    assert rep.watermarks == {1: 2, 3: 77}
    assert rep.apply_status[(1, 3)] == E1 - 1     # the source's table, kept
    assert rep.max_replicated_epoch(1) == 0       # cluster 1 applied nothing of 2 yet
    src.close()
    sm.close()


def _key(k: int) -> bytes:
    from gateway.node.state import keys
    return keys.row_key("s", "t", [value_pb2.Value(int_value=k)])


def test_a_replayed_chunk_changes_nothing_and_a_resume_goes_on_after_the_last(tmp_path):
    src = source(tmp_path)
    sm = StoreStateMachine(str(tmp_path / "dst"), cluster_id=2)
    apply(sm, step(request=True), step(begin=begin()))
    cs = chunks(src)
    apply(sm, step(chunk=cs[0], local_epoch=LOCAL), step(chunk=cs[1], local_epoch=LOCAL))
    state = sm.seeds["fromA"]
    assert (state.chunk.chunk_no, state.chunk.last_key) == (2, cs[1].last_key)
    before = list(sm.store.scan(b"r", b"t"))
    # a second leader proposes chunk 2 again (or the replay of a log after a restart)
    apply(sm, step(chunk=cs[1], local_epoch=LOCAL + 1))
    assert list(sm.store.scan(b"r", b"t")) == before
    assert sm.seeds["fromA"].chunk.chunk_no == 2
    # a chunk out of order (4 before 3) is not installed
    apply(sm, step(chunk=cs[3], local_epoch=LOCAL))
    assert sm.seeds["fromA"].chunk.chunk_no == 2
    # the state survives a restart; the resumed stream continues after the last key
    sm.flush()
    sm.close()
    sm = StoreStateMachine(str(tmp_path / "dst"), cluster_id=2)
    state = sm.seeds["fromA"]
    snap = src.seed_pins.get(5).snapshot
    c3 = read_chunk(snap, 5, state.chunk.last_key, 0, max_rows=4)
    assert c3 is not None and [r.key for r in c3.rows] == [r.key for r in cs[2].rows]
    c3.chunk_no = state.chunk.chunk_no + 1
    install(sm, src, [c3, *[_renumber(c, i + 4) for i, c in enumerate(cs[3:])]])
    assert "fromA" not in sm.seeds and sm.replication.held(1) == E1
    assert row(sm, 11) is not None
    src.close()
    sm.close()


def _renumber(c: channel_pb2.SeedChunk, n: int) -> channel_pb2.SeedChunk:
    out = channel_pb2.SeedChunk()
    out.CopyFrom(c)
    out.chunk_no = n
    return out


def test_an_end_before_the_last_chunk_is_refused(tmp_path):
    src = source(tmp_path)
    sm = StoreStateMachine(str(tmp_path / "dst"), cluster_id=2)
    apply(sm, step(request=True), step(begin=begin()))
    cs = chunks(src)
    apply(sm, step(chunk=cs[0], local_epoch=LOCAL))
    apply(sm, step(end=seed_end(src.seed_pins.get(5).snapshot, 5, E1, 1, len(cs))))
    assert "fromA" in sm.seeds and sm.replication.held(1) == 0
    src.close()
    sm.close()


def test_a_seed_restarted_under_a_new_id_removes_what_the_first_attempt_installed(tmp_path):
    src = source(tmp_path)
    sm = StoreStateMachine(str(tmp_path / "dst"), cluster_id=2)
    apply(sm, step(request=True), step(begin=begin()))
    cs = chunks(src)
    apply(sm, step(chunk=cs[0], local_epoch=LOCAL))
    assert row(sm, 0) is not None
    # the source lost its pin: a new seed (id 6) of a source that meanwhile deleted row 0
    apply(sm, step(begin=channel_pb2.SeedStart(seed_id=6, epoch=E2, source_id=1)))
    assert row(sm, 0) is None
    assert sm.seeds["fromA"].begin.seed_id == 6 and sm.seeds["fromA"].chunk.chunk_no == 0
    src.close()
    sm.close()


def test_a_merge_keeps_rows_written_here_that_the_source_has_not_applied(tmp_path):
    src = source(tmp_path)
    sm = StoreStateMachine(str(tmp_path / "dst"), cluster_id=2)
    # cluster 2 wrote rows 0 and 1 itself; cluster 1 applied 2's epoch E1 (row 0) only
    apply(sm, txn(1, E1, _insert(0, "mine0"), sid=2), txn(2, E2, _insert(1, "mine1"), sid=2))
    sm.replication.apply_status[(2, 1)] = E1
    apply(sm, step(request=True, merge=True), step(begin=begin()))
    install(sm, src, chunks(src))
    assert row(sm, 0).values[0].string_value == "v0"       # the source had it: overwritten
    assert row(sm, 1).values[0].string_value == "mine1"    # not applied there: kept
    assert row(sm, 1).author == 2
    src.close()
    sm.close()


def test_a_write_made_here_during_a_seed_is_neither_overwritten_nor_removed(tmp_path):
    src = source(tmp_path)
    sm = StoreStateMachine(str(tmp_path / "dst"), cluster_id=2)
    apply(sm, step(request=True), step(begin=begin()))
    cs = chunks(src)
    apply(sm, step(chunk=cs[0], local_epoch=LOCAL))
    # a client writes row 0 (already seeded) here while the seed runs
    apply(sm, txn(1, LOCAL, _update(0, "written here"), sid=2))
    # the seed restarts under a new id: the removal keeps the row written here
    apply(sm, step(begin=channel_pb2.SeedStart(seed_id=6, epoch=E1, source_id=1)))
    assert row(sm, 0).values[0].string_value == "written here"
    # and the new attempt's chunk does not overwrite it
    c = chunks(src)[0]
    c.seed_id = 6
    apply(sm, step(chunk=c, local_epoch=LOCAL))
    assert row(sm, 0).values[0].string_value == "written here"
    assert row(sm, 1).values[0].string_value == "v1"
    src.close()
    sm.close()


def test_conflict_detection_after_a_seed_judges_as_if_the_rows_had_come_by_the_channel(tmp_path):
    """NDB$EPOCH on the seeded PRIMARY: a change from the source to a row it wrote itself is
    not a conflict (the row kept its author); a change from the source to a row a third
    cluster wrote is one until the source has applied an epoch of this cluster after the
    seed (the row carries this cluster's epoch of its install, as a row the channel applied
    would)."""
    from gateway.conflict import ConflictRule, Role
    from gateway.v1 import gtid_pb2, transaction_pb2

    src = source(tmp_path)
    sm = StoreStateMachine(str(tmp_path / "dst"), cluster_id=2)
    sm.conflict_rules = {"s.t": ConflictRule("s.t", "NDB$EPOCH")}
    sm.conflict_role = Role.PRIMARY
    apply(sm, step(request=True), step(begin=begin()))
    install(sm, src, chunks(src))

    def change(tid: int, *stmts) -> bytes:
        t = transaction_pb2.Transaction(
            gtid=gtid_pb2.Gtid(server_id=1, trans_id=tid), epoch=E2, author=1,
            start_timestamp_ns=9000 + tid, commit_timestamp_ns=9000 + tid, segment_id=1,
            end_segment=True, statements=list(stmts))
        return messages.pack(replication_pb2.ReplicatedEpoch(
            channel="fromA", source_id=1, source_epoch=E2 + tid, local_epoch=LOCAL + 1,
            items=[replication_pb2.ReplicatedItem(transaction=t)], segment_id=1,
            end_segment=True, derived_trans_id=50 + tid, derived_commit_ts=9500 + tid))

    apply(sm, change(3, _update(0, "A again")))
    assert row(sm, 0).values[0].string_value == "A again"
    assert sm.conflict_counters.get("fromA", {}).get("conflict_fn_epoch", 0) == 0
    apply(sm, change(4, _update(100, "A over 3")))
    assert row(sm, 100).values[0].string_value == "from 3"  # rejected: a conflict
    assert sm.conflict_counters["fromA"]["conflict_fn_epoch"] == 1
    # once cluster 1 reflects this cluster's epoch of the row's last change here (the
    # primary's refresh of the conflict), a change from it is no conflict
    refreshed = sm.store.get_version(_key(100))
    assert refreshed.author == 2 and refreshed.epoch == LOCAL + 1
    sm.replication.apply_status[(2, 1)] = refreshed.epoch
    apply(sm, change(5, _update(100, "A over 3, later")))
    assert row(sm, 100).values[0].string_value == "A over 3, later"
    src.close()
    sm.close()
