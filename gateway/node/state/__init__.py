"""The replicated state: the state machine (``state_machine``, a dispatcher by entry tag) and
what it applies -- client transactions (``txn_apply``, ``conditions``, ``gtid_use``),
replicated epochs (``epoch_apply``, ``epoch_wire``, ``epoch_guards``, ``conflict_apply``) and
commands (``command_apply``) --, the store's keys and operations (``keys``, ``store_ops``), the
wire paths (``wire``, Python twin of ``gateway/node/_wire.c``) and the checks of the applied
state against the appliers and the disk (``consistency``, ``data_verify``), and the store's
space alarms (``alarms``). Imports ``base`` and ``storage``."""
