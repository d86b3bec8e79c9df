"""Multi-process test harness: a fault-injecting TCP proxy network between peers
(:mod:`gateway.testing.proxy`), a process-cluster manager for ``gateway run`` nodes
(:mod:`tests.harness.cluster`) and a client workload that records histories for the
linearizability checker (:mod:`tests.harness.workload`).

Across clusters: several clusters with proxies on their channel links
(:mod:`tests.harness.clusters`), a fault schedule drawn from a seed
(:mod:`tests.harness.faults`), bank, list-append and hot-key workloads
(:mod:`tests.harness.workloads`), images and fingerprints of what clusters, nodes and SQLite
sinks hold (:mod:`tests.harness.fingerprints`), and one cell run and checked end to end
(:mod:`tests.harness.scenario`).
"""
