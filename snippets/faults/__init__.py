"""When it goes wrong: programs that hang or fail across ranks, and how to find why."""
