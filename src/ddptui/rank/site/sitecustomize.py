"""ddptui's hook for a job it wraps or listens for: makes the job's ranks debuggable.

ddptui puts this directory first on the job's PYTHONPATH (`ddptui -- COMMAND`, or the line
`ddptui listen` prints). Python imports it in every process of the job; it does nothing unless
the process carries ddptui's link variables, then chains to the `sitecustomize` it hides.
"""


def _ddptui_boot() -> None:
    import os
    import sys

    if not os.environ.get("DDPTUI_SOCKET"):
        return
    here = os.path.dirname(os.path.abspath(__file__))
    parent = os.path.dirname(os.path.dirname(os.path.dirname(here)))  # site -> rank -> ddptui -> parent
    added = parent not in sys.path
    if added:
        sys.path.append(parent)  # last: ddptui's own directory never shadows the job's modules
    try:
        from ddptui.rank import wrapped
    except Exception:  # this Python cannot import ddptui: the job runs undebugged
        return
    finally:
        if added:
            sys.path.remove(parent)
    wrapped.boot()


def _ddptui_chain() -> None:
    """Run the sitecustomize this one hides, if there is one further down sys.path."""
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)


_ddptui_boot()
_ddptui_chain()
