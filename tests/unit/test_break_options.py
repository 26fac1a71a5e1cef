"""`--break` checked up front: each form pdb's `b` takes, resolved to what the ranks set."""

from __future__ import annotations

import json
import os

import pytest
from conftest import SCRIPTS

from ddptui.cli import break_options
from ddptui.cli.break_options import BreakError, resolve
from ddptui.core.transport.launch import LaunchSpec, break_env
from ddptui.rank.breaks import BREAKS_ENV, START_ENV
from ddptui.rank.skips import same_file

STEPS = str(SCRIPTS / "steps.py")


def test_a_file_is_found_beside_the_script_and_made_absolute() -> None:
    assert resolve("steps.py:8", STEPS) == f"{STEPS}:8"
    assert resolve("steps:8, value > 3", STEPS) == f"{STEPS}:8, value > 3"


def test_functions_by_file_module_or_bare_name() -> None:
    nan = str(SCRIPTS / "nan_rank2.py")
    assert resolve("nan_rank2.py:main", nan) == f"{nan}:main"
    assert resolve("nan_rank2.main", nan) == f"{nan}:main"
    assert resolve("main", nan) == f"{nan}:main"
    assert resolve("json.dumps", None) == f"{json.__file__}:dumps"  # where Python imports it from


def test_a_bare_function_without_a_script_asks_for_its_file() -> None:
    with pytest.raises(BreakError, match=r"give the function as FILE:FUNCTION or MODULE\.FUNCTION"):
        resolve("main", None)


def test_the_ranks_get_the_breaks_and_nothing_a_ddptui_around_gave() -> None:
    spec = LaunchSpec(target=STEPS, breaks=(f"{STEPS}:8",), stop_at_start=True)
    env = break_env({BREAKS_ENV: '["outer.py:1"]'}, spec)
    assert json.loads(env[BREAKS_ENV]) == [f"{STEPS}:8"] and env[START_ENV] == "1"
    assert break_env({BREAKS_ENV: "x", START_ENV: "1"}, LaunchSpec(target=STEPS)) == {}


def test_a_skipped_site_names_files_by_the_end_of_their_path() -> None:
    assert same_file(STEPS, "steps.py") and same_file(STEPS, "scripts/steps.py") and same_file(STEPS, STEPS)
    assert not same_file(STEPS, "teps.py") and not same_file(STEPS, os.path.join("other", "steps.py"))
    assert break_options.code_lines(compile("x = 1\n\ny = 2\n", "f", "exec")) == {1, 3}
