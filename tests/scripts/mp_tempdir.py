"""Each rank has multiprocessing make its temporary folder (as DataLoader workers do), then stops."""

import multiprocessing.util

print("tempdir made:", multiprocessing.util.get_temp_dir().startswith("/"))
breakpoint()
