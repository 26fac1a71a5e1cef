"""One rank of a 2-rank gloo job for the collective-log tests: runs a scenario, writes collective_log().

Usage: `python fr_job.py SCENARIO` with MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE and FR_OUT set.
ddptui's import hook goes in before torch is imported, as in a rank: it wraps the point-to-point
functions, and the collectives too where the Flight Recorder is off (TORCH_FR_BUFFER_SIZE=0). The
log goes to FR_OUT/rank<R>.json. Where a scenario blocks, a thread writes it a moment after the
main thread entered its last call, as ddptui's request thread would. `# @name` marks lines the
tests look up.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from datetime import timedelta

from ddptui.rank import collectives, flight_recorder

collectives.install_wrappers_on_import()

import torch  # noqa: E402 (after the hook: the wrappers go in as torch.distributed loads)
import torch.distributed as dist  # noqa: E402

RANK = int(os.environ["RANK"])


def write_log(extra: dict[str, object] | None = None) -> None:
    """Write this rank's collective log where the test reads it, and its Flight Recorder dump for
    torchfrtrace in FR_OUT/traces/.
    """
    log = collectives.collective_log()
    traces = os.path.join(os.environ["FR_OUT"], "traces")
    os.makedirs(traces, exist_ok=True)
    trace_error = flight_recorder.write_fr_trace(os.path.join(traces, f"rank_{RANK}"))
    body = {"log": log, "trace_error": trace_error, **(extra or {})}
    path = os.path.join(os.environ["FR_OUT"], f"rank{RANK}.json")
    with open(path + ".tmp", "w") as out:
        json.dump(body, out)
    os.replace(path + ".tmp", path)


def all_retired(timeout: float = 5.0) -> None:
    """Wait until the recorder calls every collective completed: gloo retires an entry on its own
    worker thread after the work is done, which on a loaded machine can come well after the call
    returned (a DDP construction broadcast was still `issued` after two training steps)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(
        e["state"] != "completed" for e in collectives.collective_log()
    ):
        time.sleep(0.05)


def write_log_soon() -> None:
    """Write the log from another thread once the main thread has blocked in what comes next."""
    threading.Thread(target=lambda: (time.sleep(1.5), write_log()), daemon=True).start()


def reduce(t: torch.Tensor) -> None:
    """A user function around a collective: the call site is the line inside it."""
    dist.all_reduce(t)  # @nested


def basic() -> None:
    """A few collectives of known ops, shapes and dtypes, then the log."""
    dist.all_reduce(torch.ones(3))  # @ar3
    dist.all_reduce(torch.ones(2, 4, dtype=torch.float64))  # @ar24
    dist.broadcast(torch.zeros(5, dtype=torch.int64), src=0)  # @bcast
    dist.barrier()  # @barrier
    reduce(torch.ones(7))
    # gloo retires a work's record on its own thread a moment after the rank's wait returned
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
        e["state"] != "completed" for e in collectives.collective_log()
    ):
        time.sleep(0.01)
    write_log(
        {"pg_seq": dist.group.WORLD._get_sequence_number_for_group(), "tail": collectives.collective_log(2)}
    )


def hang() -> None:
    """Rank 1 sleeps instead of joining the third all_reduce; rank 0 waits in it."""
    for _ in range(2):
        dist.all_reduce(torch.ones(3))
    write_log_soon()
    if RANK == 1:
        time.sleep(60)  # @hang_sleep
    dist.all_reduce(torch.ones(3))  # @hang


def skip() -> None:
    """Rank 1 skips the second of three loop all_reduces: its next one pairs with rank 0's third."""
    t = torch.ones(3)
    for i in range(3):
        if not (RANK == 1 and i == 1):
            dist.all_reduce(t)  # @loop
    write_log_soon()
    dist.all_reduce(t)  # @after
    time.sleep(60)  # @skip_sleep


def mismatch() -> None:
    """Rank 0 reduces 3 floats, rank 1 four: gloo returns garbage or fails; then the log."""
    error = ""
    try:
        dist.all_reduce(torch.ones(3 + RANK))  # @mismatch
    except RuntimeError as exc:
        error = str(exc)[:200]
    write_log({"error": error})
    time.sleep(3)  # the peer must be done before this rank's exit closes its connections


def exits() -> None:
    """Rank 1 exits after two all_reduces; rank 0's third fails when rank 1's connections close."""
    for _ in range(2):
        dist.all_reduce(torch.ones(3))
    if RANK == 1:
        write_log()
        os._exit(0)
    error = ""
    try:
        dist.all_reduce(torch.ones(3))  # @third
    except RuntimeError as exc:
        error = str(exc)[:200]
    write_log({"error": error})


def deadlock() -> None:
    """Rank 0 enters an all_reduce while rank 1 enters a barrier at the same sequence number."""
    dist.all_reduce(torch.ones(3))
    write_log_soon()
    if RANK == 0:
        dist.all_reduce(torch.ones(3))  # @dl_reduce
    else:
        dist.barrier()  # @dl_barrier
    time.sleep(60)


def ddp() -> None:
    """Two DDP steps: the gradient all-reduces run inside backward(), issued from C++."""
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        loss = model(torch.randn(2, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()  # @backward
        optimizer.step()
    all_retired()
    write_log()


def p2p() -> None:
    """Point-to-point ops between two all_reduces, blocking, async and batched; the recorder keeps
    none of them on gloo, ddptui's wrappers all."""
    other = 1 - RANK
    t = torch.ones(3)
    dist.all_reduce(t)  # @p2p_first
    if RANK == 0:
        dist.send(t, other)  # @p2p_send
        dist.isend(torch.ones(2, dtype=torch.int64), dst=other).wait()  # @p2p_isend
    else:
        dist.recv(t)  # @p2p_recv
        dist.irecv(torch.ones(2, dtype=torch.int64), src=other).wait()  # @p2p_irecv
    pair = [dist.P2POp(dist.isend, t, other), dist.P2POp(dist.irecv, torch.zeros(3), other)]
    for work in dist.batch_isend_irecv(pair):  # @p2p_batch
        work.wait()
    dist.all_reduce(t)  # @p2p_last
    all_retired()
    write_log()


def main() -> None:
    """Join the job, run the scenario named on the command line."""
    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=60))
    globals()[sys.argv[1]]()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
