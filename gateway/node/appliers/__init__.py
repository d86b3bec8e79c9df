"""Hosting the appliers: the entry source and Subscribe (``feed``, Python twin of
``gateway/node/_feed.c``), the applier threads (``applier_host``) and their rebuild from a
snapshot (``applier_rebuild``). Imports ``base``, ``storage``, ``state`` and ``loop``."""
