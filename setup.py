"""Build hook for the optional C accelerators; all metadata lives in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "gateway.core._recordstream",
            ["gateway/core/_recordstream.c"],
            depends=["gateway/core/_protowire.h", "gateway/core/_stuffing.h",
                     "gateway/core/_crc.h"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,  # without a compiler, gateway.core.records falls back to Python
        ),
        Extension(
            "gateway.core._columns",
            ["gateway/core/_columns.c"],
            depends=["gateway/core/_protowire.h", "gateway/v1/wire_tags.h"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,  # without a compiler, gateway.core.insert_columns reads in Python
        ),
        Extension(
            "gateway.appliers._sqlite_bind",
            ["gateway/appliers/_sqlite_bind.c"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,  # without it, the SQLite applier binds through the sqlite3 module
        ),
        Extension(
            "gateway.core.lsm._bloom",
            ["gateway/core/lsm/_bloom.c"],
            depends=["gateway/core/_crc.h"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,  # without a compiler, gateway.core.lsm.bloom probes in Python
        ),
        Extension(
            "gateway.core.lsm._memsort",
            ["gateway/core/lsm/_memsort.c"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,  # without a compiler, gateway.core.lsm.memtable sorts in Python
        ),
        Extension(
            "gateway.core.lsm._block",
            ["gateway/core/lsm/_block.c"],
            depends=["gateway/core/_buf.h", "gateway/core/_stuffing.h", "gateway/core/_crc.h"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,  # without a compiler, gateway.core.lsm.format searches in Python
        ),
        Extension(
            "gateway.node._wire",
            ["gateway/node/_wire.c"],
            depends=["gateway/core/_buf.h", "gateway/core/_protowire.h", "gateway/v1/wire_tags.h",
                     "gateway/node/_keyvalues.h", "gateway/node/_txnhead.h"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,  # without a compiler, gateway.node.state.state_machine uses Python
        ),
        Extension(
            "gateway.node.api._read_wire",
            ["gateway/node/api/_read_wire.c"],
            depends=["gateway/core/_buf.h", "gateway/core/_protowire.h", "gateway/v1/wire_tags.h",
                     "gateway/node/_keyvalues.h"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,  # without a compiler, gateway.node.api.read_wire uses Python
        ),
        Extension(
            "gateway.node._feed",
            ["gateway/node/_feed.c"],
            depends=["gateway/core/_protowire.h", "gateway/node/_slots.h",
                     "gateway/node/_txnhead.h"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,  # without a compiler, node.appliers.feed builds entries in Python
        ),
        Extension(
            "gateway.node._judge",
            ["gateway/node/_judge.c"],
            depends=["gateway/core/_protowire.h", "gateway/node/_slots.h"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,  # without a compiler, node.state.epoch_judge judges in Python
        ),
        Extension(
            "gateway.node._peer_codec",
            ["gateway/node/_peer_codec.c"],
            depends=["gateway/core/_protowire.h"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,  # without a compiler, gateway.node.peers.peer_codec uses Python
        ),
        Extension(
            "spark_applier._txndecode",
            ["spark_applier/_txndecode.c"],
            depends=["gateway/core/_protowire.h", "gateway/v1/wire_tags.h"],
            extra_compile_args=["-O3", "-std=gnu11"],
            optional=True,  # without a compiler, spark_applier.decode decodes in Python
        ),
    ]
)
