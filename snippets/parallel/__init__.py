"""The strategies: the overview, the mesh and the 3D-parallel GPT, the sizing
calculator checked against real runs, the prediction questions the notes ask (each
answered by the formulas of the floors below), and a folder per strategy: ``data/``
(DDP), ``sharded/`` (ZeRO, mixed precision), ``tensor/``, ``pipeline/``,
``context/``, ``experts/`` (expert parallelism). It may import ``core``, ``sizing``,
``models``, ``comm`` and ``attention`` (floors: ``tests/core/test_floors.py``).
"""
