"""Formats and storage: the stuffed record stream, the transport frame and the segmented WAL.

Everything here depends only on the standard library, ``crc32c`` and ``protobuf``.
"""
