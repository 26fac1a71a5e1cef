"""Opens the debugger with `pdb.Pdb().set_trace()` and `import pdb; pdb.set_trace()`."""

import os
import pdb

rank = int(os.environ["RANK"])
pdb.Pdb().set_trace()
first = "after Pdb()"
pdb.set_trace()
second = "after set_trace"
