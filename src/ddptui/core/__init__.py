"""The UI-free core: launch ranks, know their state, drive their debuggers in lockstep.

Nothing here imports textual: the batch front end and the tests use it headless.
"""
