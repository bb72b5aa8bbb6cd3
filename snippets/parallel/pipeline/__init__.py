"""Pipeline parallelism: schedules, executor, timeline."""
