"""Spark execution: routing, the per-node operators and task metrics.

Strategies never import this package; it imports them. Routing is Spark SQL where a
strategy's decision is a function of the key (the same Murmur3 decisions as
``balancebench.routing_table``, evaluated by the JVM); per-tuple routers (pkg, dchoices,
wchoices), whose decisions depend on each sender's earlier tuples, run their loop in the
sender's task: in the JVM (``jvm/PerSenderRouting.java``, ``jvm_routing``) where ``make
setup`` compiled it, else in a Python worker (``mapInArrow``), timed and charged as
routing work either way.
"""
