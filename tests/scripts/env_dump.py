"""Prints rank 1's environment as one JSON line (`ENV {...}`), to compare launchers."""

import json
import os

if os.environ.get("RANK") == "1":
    print("ENV " + json.dumps(dict(os.environ), sort_keys=True))
