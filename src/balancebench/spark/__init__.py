"""Spark execution: routing, the per-node operators and task metrics.

Strategies never import this package; it imports them. Routing runs inside the routing
stage's tasks, the same Murmur3 decisions as ``balancebench.core.routing_table``: a routing
table or a bucket map by one call per tuple into the JVM router (``jvm/TableRouting.java``,
``jvm_routing``) where ``make setup`` compiled it, else in Spark SQL
(``placement.SlotTable``); per-tuple routers (pkg, dchoices, wchoices), whose decisions
depend on each sender's earlier tuples, run their loop in the sender's task: in the JVM
(``jvm/PerSenderRouting.java``) where compiled, else in a Python worker
(``mapInArrow``), timed and charged as routing work either way.
"""
