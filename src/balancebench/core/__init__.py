"""The core vocabulary every layer speaks: operators and workloads, key loads, the routing
table and its hashing, replay clocks, Params schemas and their checks, units, the one
statistics function and the metric glossary (with the cost model's clocks). It imports
nothing else of balancebench."""
