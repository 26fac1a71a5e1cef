"""A running job.

Its ranks and their state, lockstep broadcasts, ranks that arrive, stalls, the watchdog and the
teardown.
"""
