"""What the machine does: topology and its link model, p2p bandwidth, NVLink vs
PCIe, the roofline, and a step's time predicted and profiled. It may import every
floor up to ``parallel``; not ``faults`` or ``viewer``, beside it
(floors: ``tests/core/test_floors.py``).
"""
