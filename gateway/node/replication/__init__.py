"""Replication between clusters, the node's side: channels and their roles (``channels``,
``channel_roles``) and the conflict log and rules (``conflicts``). Imports ``base``,
``state`` and ``loop``."""
