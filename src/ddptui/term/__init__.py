"""Terminal emulation for rank panes: pyte glue and key encoding, with no UI import."""
