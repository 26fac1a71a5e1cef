"""`--break FILE:LINE[,CONDITION]`: each one checked before any rank starts, its file made absolute.

The forms are pdb's `b`: `FILE:LINE`, `FILE:FUNCTION`, `MODULE.FUNCTION` or `FUNCTION` (in the
script), each with an optional condition after a comma. A file is looked for as given (absolute,
or from the current directory), then beside the script, as pdb looks for it from the rank; a
module also where Python would import it from. A line must hold code (a line Python can stop at),
a function must be defined in its file, a condition must be an expression. What comes out is what
the ranks' pdb takes (`ddptui.rank.breaks`).
"""

from __future__ import annotations

import importlib.util
import os
import pdb
import types
from collections.abc import Sequence


class BreakError(ValueError):
    """A `--break` that cannot be set; the message is one line."""


def resolve_all(specs: Sequence[str], script: str | None) -> tuple[str, ...]:
    """Every `--break` as the ranks take it; BreakError for the first that cannot be set."""
    return tuple(resolve(spec, script) for spec in specs)


def resolve(spec: str, script: str | None) -> str:
    """One `--break`, its file absolute; BreakError saying why it cannot be set."""
    folders = [os.path.dirname(os.path.abspath(script))] if script else []
    where, comma, condition = spec.partition(",")
    where, condition = where.strip(), condition.strip()
    if not where:
        raise BreakError(f"--break {spec!r}: say where (FILE:LINE, FILE:FUNCTION or MODULE.FUNCTION)")
    if comma:
        check_condition(spec, condition)
    file, colon, target = where.rpartition(":")
    if not colon:
        module, _, target = where.rpartition(".")
        path = find_module(spec, module, folders) if module else the_script(spec, script)
    else:
        path = find_file(spec, file.strip(), folders)
    target = target.strip()
    if target.isdigit():
        check_line(spec, path, int(target))
    elif not target.isidentifier():
        raise BreakError(f"--break {spec}: {target!r} is neither a line number nor a function name")
    elif pdb.find_function(target, path) is None:
        raise BreakError(f"--break {spec}: no function {target} is defined in {path}")
    return f"{path}:{target}" + (f", {condition}" if condition else "")


def check_condition(spec: str, condition: str) -> None:
    """BreakError unless `condition` is a Python expression."""
    if not condition:
        raise BreakError(f"--break {spec}: no condition after the comma")
    try:
        compile(condition, "<condition>", "eval", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        why = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise BreakError(f"--break {spec}: the condition is not a Python expression ({why})") from None


def find_file(spec: str, file: str, folders: Sequence[str]) -> str:
    """The absolute path of FILE, from the current directory or beside the script (`.py` may be left out)."""
    names = [file] if file.endswith(".py") else [file, f"{file}.py"]
    for folder in ["", *folders]:
        for name in names:
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                return os.path.abspath(path)
    raise BreakError(f"--break {spec}: no such file: {file}")


def find_module(spec: str, module: str, folders: Sequence[str]) -> str:
    """The file of MODULE: beside the script, or where Python imports it from."""
    try:
        return find_file(spec, module.replace(".", os.sep), folders)
    except BreakError:
        pass
    try:
        found = importlib.util.find_spec(module) if "." not in module else None
    except (ImportError, ValueError):
        found = None
    if found is not None and found.origin and found.origin.endswith(".py"):
        return found.origin
    raise BreakError(f"--break {spec}: no module {module} beside the script or on the Python path")


def the_script(spec: str, script: str | None) -> str:
    """The script a bare function name is looked for in."""
    if script is None or not os.path.isfile(script):
        raise BreakError(f"--break {spec}: give the function as FILE:FUNCTION or MODULE.FUNCTION")
    return os.path.abspath(script)


def check_line(spec: str, path: str, line: int) -> None:
    """BreakError unless LINE of the file holds code Python can stop at."""
    try:
        with open(path, "rb") as source:
            text = source.read()
    except OSError as exc:
        raise BreakError(f"--break {spec}: cannot read {path}: {exc.strerror}") from None
    count = text.count(b"\n") + (0 if text.endswith(b"\n") or not text else 1)
    if not 1 <= line <= count:
        raise BreakError(f"--break {spec}: line {line} is out of range ({path} has {count} lines)")
    try:
        code = compile(text, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise BreakError(f"--break {spec}: {path} does not compile: {exc}") from None
    if line not in code_lines(code):
        raise BreakError(
            f"--break {spec}: line {line} of {path} holds no code (blank, a comment, or a docstring)"
        )


def code_lines(code: types.CodeType) -> set[int]:
    """The lines of a code object and of every code object inside it: where Python can stop."""
    lines = {line for _, _, line in code.co_lines() if line}  # not None, nor 0 (before the first line)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            lines |= code_lines(const)
    return lines
