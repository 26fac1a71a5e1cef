"""`ddptui attach PID`: a job ddptui did not start, read-only."""
