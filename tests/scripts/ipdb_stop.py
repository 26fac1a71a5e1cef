"""ipdb.set_trace(): ddptui points it at its own pdb so every rank stops with a rank prompt."""

import os

import ipdb

rank = int(os.environ["RANK"])
ipdb.set_trace()
after = "ipdb stop"
