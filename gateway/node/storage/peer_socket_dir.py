"""The private directory of the gRPC peer server's Unix socket (docs/node.md, "Peer port").

The peer port's listener relays every connection that is not the framed Raft stream to the
gRPC peer server, which listens on a Unix socket in a directory only this process may enter:
``<data dir>/peer-socket`` when the socket's path fits a Unix socket address, else a new
directory in TMPDIR.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile

__all__ = ["PEER_SOCKET_DIR", "PeerSocketDirError", "make_peer_dir"]

log = logging.getLogger("gateway.node")

#: The data directory's entry that holds the gRPC peer server's Unix socket while the node runs.
PEER_SOCKET_DIR = "peer-socket"
#: The longest path a Unix socket address holds on Linux (``sun_path`` is 108 bytes, NUL included).
_SUN_PATH_MAX = 107


class PeerSocketDirError(Exception):
    """Neither directory could be made; one line naming where and why."""


def make_peer_dir(data_dir: str, *, in_data_dir: bool) -> str:
    """Make the private (0700) directory of the gRPC peer server's Unix socket.

    ``<data dir>/peer-socket`` when ``in_data_dir`` and the socket's path fits a Unix
    socket address: one a crash left behind is replaced (the store's ``LOCK``, held by
    now, makes this process the data directory's only user), so a killed node leaves
    nothing elsewhere. Otherwise (a deep data directory, one where the directory cannot be
    made, or -- the caller's retry -- one whose file system refused the socket) a new
    directory in TMPDIR. Removed at stop either way. Raises ``PeerSocketDirError``
    when neither can be made."""
    own = os.path.join(os.path.abspath(data_dir), PEER_SOCKET_DIR)
    if in_data_dir and len(os.fsencode(os.path.join(own, "grpc.sock"))) <= _SUN_PATH_MAX:
        try:
            if os.path.lexists(own):
                if os.path.isdir(own) and not os.path.islink(own):
                    shutil.rmtree(own)
                else:
                    os.remove(own)
            os.mkdir(own, 0o700)
            return own
        except OSError as exc:
            log.warning("cannot make %s for the gRPC peer socket (%s); using %s", own,
                        exc.strerror or exc, tempfile.gettempdir())
    try:
        return tempfile.mkdtemp(prefix="gateway-peer-")
    except OSError as exc:
        raise PeerSocketDirError(f"listen: cannot make the private directory of the gRPC "
                                 f"peer socket in {tempfile.gettempdir()} (set TMPDIR): "
                                 f"{exc.strerror or exc}") from None
