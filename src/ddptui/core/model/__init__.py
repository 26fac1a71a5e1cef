"""Plain values and readers every wing shares.

A rank's state, rank sets, terminal text and output, and what a rank's own text says (its
stacks, errors and fatal dumps).
"""
