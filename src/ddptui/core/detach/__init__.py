"""A session that outlives its terminal: the session process and the pty its app runs on, where
sessions live, the protocol its clients speak, and the clients (`ddptui join`, `join --batch`,
`sessions`, `kill`)."""
