"""A seeded cluster receives the table definitions, versions and schema histories with the
rows (``seed_source.seed_end`` carries them, ``seed_apply`` installs them at the end)."""

from __future__ import annotations

from gateway.node.state.schema_apply import read_history
from gateway.node.state.state_machine import StoreStateMachine
from gateway.schema.apply import plan_add_column, plan_rename_column
from gateway.schema.codec import encode_event
from gateway.schema.model import Column
from tests.node.test_seed_install import begin, chunks, install, row, step
from tests.node.test_seed_source import E1, E2, _insert, apply, marker, pin, txn


def _change(sm: StoreStateMachine, plan, *args) -> bytes:  # type: ignore[no-untyped-def]
    st = sm.tables["s.t"]
    return encode_event(plan(st.definition, "s.t", *args, origin="1", parent=st.head))


def test_a_seed_installs_the_sources_definitions_versions_and_history(tmp_path) -> None:
    src = StoreStateMachine(str(tmp_path / "src"), cluster_id=1)
    apply(src, txn(1, E1, *[_insert(k, f"v{k}") for k in range(6)]))  # implicit version 1
    apply(src, _change(src, plan_add_column, Column("c", "INTEGER", 4)))
    apply(src, _change(src, plan_rename_column, "v", "title"))
    apply(src, marker(E1, 1), pin(5))
    # after the pin: not in the seed
    apply(src, _change(src, plan_add_column, Column("later", "INTEGER", 0)), marker(E2, 1))
    assert src.tables["s.t"].version == 4

    dst = StoreStateMachine(str(tmp_path / "dst"), cluster_id=2)
    apply(dst, step(request=True), step(begin=begin()))
    install(dst, src, chunks(src))
    want = read_history(src.store.scan_prefix, "s.t")[:3]
    got = read_history(dst.store.scan_prefix, "s.t")
    assert [h.event for h in got] == [h.event for h in want]
    assert got[0].event.implicit and got[2].event.kind == "rename_column"
    st = dst.tables["s.t"]
    assert st.version == 3 and st.definition is not None
    assert st.definition.names == ("id", "title", "c")
    assert st.head == src_head_at(src, 3)
    r = row(dst, 2)
    assert r is not None and [f.name for f in r.fields] == ["title", "c"]
    dst.close()  # and they are durable
    again = StoreStateMachine(str(tmp_path / "dst"), cluster_id=2)
    assert again.tables["s.t"] == st
    again.close()


def src_head_at(sm: StoreStateMachine, version: int) -> bytes:
    from gateway.schema.codec import event_id

    return event_id(read_history(sm.store.scan_prefix, "s.t")[version - 1].event)
