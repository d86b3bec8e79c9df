#!/usr/bin/env python3
"""Exit 0 when an AMQP 0-9-1 broker at HOST PORT answers the protocol header with
Connection.Start (a method frame on channel 0), else 1. Standard library only."""

import socket
import sys

host, port = sys.argv[1], int(sys.argv[2])
try:
    with socket.create_connection((host, port), timeout=2) as s:
        s.sendall(b"AMQP\x00\x00\x09\x01")
        head = s.recv(7)
except OSError:
    sys.exit(1)
sys.exit(0 if len(head) == 7 and head[0] == 1 and head[1:3] == b"\x00\x00" else 1)
