"""Multi-process test harness: a fault-injecting TCP proxy network between peers
(:mod:`gateway.testing.proxy`), a process-cluster manager for ``gateway run`` nodes
(:mod:`tests.harness.cluster`, on :mod:`gateway.testing.launcher`) and a client workload that
records histories for the linearizability checker (:mod:`tests.harness.workload`).
"""
