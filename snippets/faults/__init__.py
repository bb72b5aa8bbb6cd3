"""When it goes wrong: programs that hang or fail across ranks, how to find why, and
how a training state survives: checkpoints that reshard, a crash and its resume."""
