"""Arm and disarm `:until-collective`'s points in a 1-rank gloo job: torch's functions keep their
identity while armed, and every object comes back after; prints `ok`."""

import os

os.environ.update(
    MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("PORT", "29561"), RANK="0", WORLD_SIZE="1"
)

import torch
import torch.distributed as dist

from ddptui.rank import until, until_points

dist.init_process_group("gloo")
methods = {name: dist.ProcessGroup.__dict__.get(name) for name in until_points.PG_METHODS}
ops = {name: getattr(torch.ops._c10d_functional, name) for name in until_points.FUNCTIONAL_OPS}
functions = {name: getattr(dist, name) for name in ("all_reduce", "isend", "irecv", "batch_isend_irecv")}
backward = torch.autograd.backward
assert until.arm().hooked
assert all(getattr(dist, name) is f for name, f in functions.items()), "dist functions keep their identity"
assert dist.ProcessGroup.__dict__["allreduce"] is not methods["allreduce"], "armed: the method is wrapped"
assert torch.ops._c10d_functional.all_reduce.default is ops["all_reduce"].default, (
    "overloads are the packet's"
)
assert torch.autograd.backward is not backward
until.disarm()
assert all(dist.ProcessGroup.__dict__.get(name) is method for name, method in methods.items())
assert all(getattr(torch.ops._c10d_functional, name) is op for name, op in ops.items())
assert torch.autograd.backward is backward
tensor = torch.ones(3)
dist.all_reduce(tensor)  # unarmed: torch's own, no stop
print("ok", float(tensor.sum()))
dist.destroy_process_group()
