"""`python -m ddptui`: the same as the `ddptui` console script."""

from ddptui.cli import main

raise SystemExit(main())
