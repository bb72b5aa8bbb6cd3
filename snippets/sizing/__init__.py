"""The calculator's pure formulas, one floor above ``core``: parameters, FLOPs,
activations, memory (with ZeRO's model-state formulas), the α-β cost of collectives,
traffic, throughput, the presets and the estimate built from them, its command line
(``size``) and widget. No torch model here: it may import ``core`` only
(floors: ``tests/core/test_floors.py``).
"""
