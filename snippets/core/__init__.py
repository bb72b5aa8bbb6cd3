"""The ground floor: what every snippet imports. The runtime (launch, ranks, backend,
device, print0, timeouts), the command line's helpers, the import graph (the runtime
reads it to choose what the fork server preloads), results and their cache, parts
(what a page shows, as data), claims, measurement and timing, charts, traces and
players, torchrun in sessions of its own (stopped however it ends, what it leaves
found). It imports no other folder of ``snippets`` (floors:
``tests/core/test_floors.py``).
"""
