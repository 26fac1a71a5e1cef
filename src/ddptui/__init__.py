"""ddptui: a terminal debugger for PyTorch distributed jobs, one pdb pane per rank."""

__version__ = "0.1.0"
