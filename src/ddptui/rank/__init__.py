"""Code that runs inside every rank process: standard library only, imported before the user's script."""
