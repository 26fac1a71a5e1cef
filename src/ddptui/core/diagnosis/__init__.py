"""What went wrong and where; it listens to the session.

Collective verdicts, the root cause, hints, merged stacks, cross-rank comparison and the DDP
replica check.
"""
