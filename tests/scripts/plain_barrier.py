"""Plain Python (no torch): stop at breakpoint(), step a few lines, meet every rank at a barrier.

The barrier is a fake collective over a local socket, so many ranks fit in a small machine: rank 0
listens on MASTER_PORT from the start, every other rank connects when it reaches the barrier, and
rank 0 releases them all once the last one has arrived. A rank blocked there is idle in a system
call, as in a real collective, so ddptui shows it `waiting`. `--crash R` makes rank R raise before
the barrier (the others then wait for it forever).
"""

import os
import socket
import sys
import time

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
address = (os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ["MASTER_PORT"]))
crash = int(sys.argv[sys.argv.index("--crash") + 1]) if "--crash" in sys.argv else None
server = socket.create_server(address, backlog=world) if rank == 0 else None


def arrive() -> socket.socket:
    """Connect to rank 0 (retrying while it is not listening yet)."""
    while True:
        try:
            return socket.create_connection(address)
        except ConnectionRefusedError:
            time.sleep(0.05)


def barrier() -> None:
    """Return once every rank has called barrier()."""
    if server is not None:
        peers = [server.accept()[0] for _ in range(world - 1)]
        for peer in peers:
            peer.sendall(b"go")
            peer.close()
        return
    with arrive() as connection:
        connection.recv(2)


value = rank * 10
breakpoint()
value += 1
value += 2
if rank == crash:
    raise ValueError(f"rank {rank} never reaches the barrier")
barrier()
print(f"rank {rank} passed the barrier with value {value}")
