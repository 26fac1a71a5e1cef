"""A session that outlives its terminal: the session process, where sessions live, the protocol
its clients speak, and the headless clients (`ddptui join --batch`, `sessions`, `kill`)."""
