"""Communication by hand: process groups, point-to-point and its plumbing, every
collective from send and recv (``collective/``), the all-reduce algorithms
(``algorithms/``) and their cost model fitted on this machine (``cost/``). It may import
``core``, ``sizing`` and ``models``; not ``attention``, beside it
(floors: ``tests/core/test_floors.py``).
"""
