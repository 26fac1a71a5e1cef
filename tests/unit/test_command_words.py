"""The words of `:` commands: split as a shell splits them, options read by argparse, a Python EXPR
left as typed, every mistake the command's one usage line."""

import pytest

from ddptui.core.commands import registry
from ddptui.core.commands.context import Context
from ddptui.core.commands.inspecting import collectives_count, compare_args, stacks_args
from ddptui.core.commands.selecting import GroupArgs, group_args
from ddptui.core.commands.words import UsageError, options_then_rest, split
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec


def test_words_group_in_quotes_and_an_unclosed_quote_is_a_usage_error() -> None:
    assert split('odd "0, 2-3"') == ["odd", "0, 2-3"]
    assert split("  ") == []
    with pytest.raises(UsageError, match="no closing quotation"):
        split('odd "0,2')


@pytest.mark.parametrize(
    ("arg", "said"),
    [
        ("", None),
        ("odd 0,2-3", GroupArgs("odd", spec="0,2-3")),
        ("odd '0, 2-3'", GroupArgs("odd", spec="0, 2-3")),
        ('"odd" from-compare 2', GroupArgs("odd", row=2)),
        ("odd from-compare '3'", GroupArgs("odd", row=3)),
    ],
)
def test_group_words(arg: str, said: GroupArgs | None) -> None:
    assert group_args(arg) == said


@pytest.mark.parametrize(
    ("arg", "why"),
    [
        ("odd", "no ranks for group 'odd'"),
        ("odd from-compare", "from-compare ROW"),
        ("odd from-compare two", "from-compare ROW"),
        ("odd from-compare 1 2", "from-compare ROW"),
        ("'odd 0,1", "no closing quotation"),
    ],
)
def test_group_words_that_say_too_little(arg: str, why: str) -> None:
    with pytest.raises(UsageError, match=why):
        group_args(arg)


def test_compare_reads_its_option_and_leaves_the_expression_as_typed() -> None:
    assert compare_args("x['a b']  +  1") == (None, "x['a b']  +  1")
    assert compare_args("--tol 1e-6 close") == (1e-6, "close")
    assert compare_args("--tol=0.5 value * 1e-9") == (0.5, "value * 1e-9")
    assert compare_args("--tol '2' d[\"k\"] if ok else 'it''s'") == (2.0, "d[\"k\"] if ok else 'it''s'")
    assert compare_args("-x") == (None, "-x")  # a minus is Python's
    assert compare_args("-- --x") == (None, "--x")  # `--` ends the options
    assert compare_args("'unclosed") == (None, "'unclosed")  # the rank says what is wrong with it


@pytest.mark.parametrize(
    ("arg", "why"),
    [
        ("--tol", "expected one argument"),
        ("--tol 0.5", "no EXPR"),
        ("--tol x loss", "invalid float value: 'x'"),
        ("--tol 'x loss", "no closing quotation"),
        ("--rtol 0.5 loss", "unrecognized arguments: --rtol$"),
        ("", "no EXPR"),
    ],
)
def test_compare_words_that_cannot_be_read(arg: str, why: str) -> None:
    with pytest.raises(UsageError, match=why):
        compare_args(arg)


def test_options_end_where_the_rest_begins() -> None:
    assert options_then_rest("--a --b 1 rest of  it", valued={"--b"}) == (["--a", "--b", "1"], "rest of  it")
    assert options_then_rest("--a", valued=()) == (["--a"], "")


@pytest.mark.parametrize(
    ("arg", "said"),
    [
        ("", (False, "")),
        ("--all", (True, "")),
        ("0,2 --all", (True, "0,2")),
        ("--all '0, 2'", (True, "0, 2")),
        ("odd", (False, "odd")),
    ],
)
def test_stacks_words(arg: str, said: tuple[bool, str]) -> None:
    assert stacks_args(arg) == said


@pytest.mark.parametrize(("arg", "why"), [("--bogus", "unrecognized arguments: --bogus"), ("--al", "--al")])
def test_stacks_unknown_options(arg: str, why: str) -> None:
    with pytest.raises(UsageError, match=why):
        stacks_args(arg)


def test_collectives_count() -> None:
    assert [collectives_count(arg) for arg in ("", "3", "'4'", " 5 ")] == [10, 3, 4, 5]
    for arg in ("x", "3 4", "-1", "''", "'3"):
        with pytest.raises(UsageError):
            collectives_count(arg)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("collectives x", "usage: :collectives [N] (N is a count, not 'x')"),
        ("compare --tol", "usage: :compare [--tol X] EXPR (argument --tol: expected one argument)"),
        ("stacks --bogus", "usage: :stacks [--all] [RANKS] (unrecognized arguments: --bogus)"),
        ("group odd", "usage: :group [NAME (0,2-3 | from-compare ROW)] (no ranks for group 'odd')"),
        ("ranks '0", "usage: :ranks [0,2-3|all|tp=0] (no closing quotation)"),
    ],
)
async def test_a_command_that_cannot_read_its_words_answers_with_its_usage(line: str, said: str) -> None:
    ctx = Context.of(Session(LaunchSpec("train.py")))  # not started: the words are read first
    assert await registry.run(ctx, line) == registry.Result((said,), error=True)
