"""How the core reaches ranks.

Their ptys and links, the pty pump, launching, logs, and ending processes that are provably
ddptui's.
"""
