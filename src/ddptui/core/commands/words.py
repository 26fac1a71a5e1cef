"""The words of a `:` command's argument: split as a shell splits them (`shlex`), options read by
`argparse`, every mistake a `UsageError` that the registry turns into the command's usage line."""

from __future__ import annotations

import argparse
import io
import shlex
from collections.abc import Collection, Sequence
from typing import NoReturn


class UsageError(ValueError):
    """An argument a command cannot read; its text says why (the registry adds the usage line)."""


class Options(argparse.ArgumentParser):
    """An `argparse` parser for a command's options that raises `UsageError` instead of exiting."""

    def __init__(self) -> None:
        """A parser without `--help` and without abbreviations (`--al` is not `--all`)."""
        super().__init__(add_help=False, allow_abbrev=False, exit_on_error=False)

    def error(self, message: str) -> NoReturn:
        """Raise the mistake, never print it or exit: a command answers with one line."""
        raise UsageError(message)

    def read(self, words: Sequence[str]) -> argparse.Namespace:
        """The options and arguments in `words`; UsageError for anything it cannot read."""
        try:
            return self.parse_intermixed_args(words)
        except argparse.ArgumentError as exc:  # some mistakes are raised, not passed to `error`
            raise UsageError(str(exc)) from None


def split(arg: str) -> list[str]:
    """`arg` split into words as a shell splits them: quotes group, a backslash escapes."""
    try:
        return shlex.split(arg)
    except ValueError as exc:  # an unclosed quote or a trailing backslash
        raise UsageError(str(exc).lower()) from None


def options_then_rest(arg: str, valued: Collection[str]) -> tuple[list[str], str]:
    """The leading `--option` words of `arg` (each in `valued` with its value), and the rest of the
    line as typed: an EXPR is Python, never split into words. `--` ends the options."""
    stream = io.StringIO(arg)  # where it stands is where the rest begins
    lexer = shlex.shlex(stream, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    words: list[str] = []
    wants_value = False
    while True:
        start = stream.tell()
        try:
            word = lexer.get_token()
        except ValueError as exc:  # an unclosed quote: in an option's value, or in Python's EXPR
            if wants_value:
                raise UsageError(str(exc).lower()) from None
            return words, arg[start:].strip()
        if word is None or word == lexer.eof:
            return words, ""
        if wants_value:
            words.append(word)
            wants_value = False
        elif word == "--":
            return words, arg[stream.tell() :].strip()
        elif word.startswith("--") and word[2:3].isalpha():
            words.append(word)
            wants_value = word in valued
        else:
            return words, arg[start:].strip()
