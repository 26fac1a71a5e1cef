"""`RankPdb`: pdb that names its rank in the prompt and reports its state over the side channel.

Every way a debugger opens in a rank leads here (`opening`); which frames are the user's is
`frames`'s, how the prompt reads and writes its terminal `prompt_terminal`'s.
"""

from __future__ import annotations

import bdb
import os
import pdb
import sys
import types
from collections.abc import Callable
from typing import Any

from ddptui.rank.frames import find_user_top, is_hidden, user_top
from ddptui.rank.paths import is_library
from ddptui.rank.prompt_terminal import (
    buffer_prompts,
    cook_terminal,
    hold,
    reading,
    release,
    restore_terminal,
    say_paused,
)
from ddptui.rank.protocol import RANK_ENV, paused_line
from ddptui.rank.skips import Skips

_ORIGINAL_PDB = pdb.Pdb
"""pdb's own debugger class. RankPdb calls its methods by name, `_ORIGINAL_PDB.setup(self, ...)`,
as pdb calls bdb's: `super()` builds an object and searches the class's bases on each call, and a
lockstep step makes ten such calls (`bench/rank_cost.py` counts a rank's instructions a step)."""
_DISABLE_EVENT = hasattr(bdb.Bdb, "disable_current_event")
"""bdb says when an event need not come again (Python 3.14: monitoring events can be turned off);
line events then go through bdb, which knows when to turn them off."""

active: RankPdb | None = None
"""The debugger whose prompt is open in this process, if any (requests evaluate in its frame)."""


detached = False
"""True once the core is gone for good (`ddptui listen --on-disconnect continue`): no prompt opens again."""


_on_resume: Callable[[], None] | None = None


def detach(resumed: Callable[[], None]) -> None:
    """Let the rank run on without a debugger: breakpoints and `breakpoint()` stop nothing from now on.

    An open prompt is left by whoever types `continue` into it; `resumed` is called right then, on
    the main thread, before the program goes on (with no prompt open it is called now).
    """
    global detached, _on_resume
    _on_resume = resumed
    detached = True
    if active is None:
        resumed()


def rank_number() -> int:
    """The global rank of this process, as ddptui (or torchrun) set it."""
    value = os.environ.get(RANK_ENV) or os.environ.get("RANK") or "0"
    return int(value) if value.isdigit() else 0


class RankPdb(_ORIGINAL_PDB):
    """pdb with a per-rank prompt, hidden launcher frames and side-channel state events."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Create the debugger; the prompt must be set per instance (pdb's __init__ overwrites it)."""
        _ORIGINAL_PDB.__init__(self, *args, **kwargs)
        self.prompt = f"(Pdb r{rank_number()}) "
        how = reading(self, self.stdin, self.stdout, self.use_rawinput)
        self.stdin, self.stdout, self.use_rawinput = how.stdin, how.stdout, how.use_rawinput
        self._may_edit = how.may_edit
        """A prompt may read through readline."""
        self._ddptui_types = how.ddptui_types
        """Commands come from ddptui (`--batch`), or from ddptui unless keys were typed (`PromptInput`)."""
        self._program_terminal: list[Any] | None = None
        """The program's terminal settings while a plain prompt had to change them (`cook_terminal`)."""
        self.post_mortem = False
        self.site: tuple[str, int] | None = None
        """Where the hard-coded breakpoint that opened this debugger was called, if one did."""
        self.user_code_only = False
        """Stop in the user's code only, not in a library (set for an interrupt, until it stops)."""
        self.why = ""
        """Why the prompt opens (`Paused.why`): `breakpoint`, `post-mortem`, `interrupt`, or empty for
        a step's end; set as the stop is decided, sent with the stop's first `paused` only."""

    def set_trace(self, frame: types.FrameType | None = None) -> None:
        """Stop in the caller.

        `torch.distributed.breakpoint()` calls this from inside torch, before the barrier that
        holds the other ranks: open the prompt right now at the user's line, so the user is
        not dropped into torch and the others stay held until this rank moves on.
        """
        if detached:
            return
        if frame is None:
            frame = sys._getframe().f_back
        caller = frame
        while caller is not None and caller.f_globals.get("__name__") == "torch.distributed":
            caller = caller.f_back
        if caller is not None:
            if Skips.skips(caller):
                return
            self.site = (caller.f_code.co_filename, caller.f_lineno)
            Skips.stopped_at(*self.site)
        self.why = "breakpoint"
        if caller is None or caller is frame:
            _ORIGINAL_PDB.set_trace(self, frame)
            return
        self.stop_at(caller)

    def stop_at(self, frame: types.FrameType, banner: str = "") -> None:
        """Open the prompt at `frame` right now, though the call in progress is deeper (in torch,
        in ddptui): the frames inside are not the user's, and `n` steps over the whole call."""
        self.reset()
        outer: types.FrameType | None = frame
        while outer is not None:
            outer.f_trace = self.trace_dispatch
            self.botframe, outer = outer, outer.f_back
        self._set_stopinfo(self.botframe, None, -1)  # type: ignore[attr-defined]  # no stop until the user's command says where
        sys.settrace(self.trace_dispatch)
        if banner:
            self.message(banner)
        self.interaction(frame, None)

    def message(self, msg: str) -> None:
        """Print a message (in one write, unbuffered too), except torch's advice to go `up`:
        ddptui already stops at the caller."""
        if "to get to the frame that called dist.breakpoint" not in msg:
            self.stdout.write(f"{msg}\n")

    def error(self, msg: str) -> None:
        """Print an error message (in one write, as `message`)."""
        self.stdout.write(f"*** {msg}\n")

    def get_stack(self, f: types.FrameType | None, t: types.TracebackType | None) -> tuple[list[Any], int]:
        """The stack up to the user's outermost frame.

        The launcher's frames above it are never shown, and walking them on every stop (working
        out each one's line number) cost about as much as the rest of a step.
        """
        outermost = self.botframe is None or self.botframe.f_back is None
        top = user_top()
        if top is None or f is None or not outermost:
            stack, index = _ORIGINAL_PDB.get_stack(self, f, t)
            find_user_top(stack)
            return stack, index
        saved, self.botframe = self.botframe, top
        try:
            return _ORIGINAL_PDB.get_stack(self, f, t)
        finally:
            self.botframe = saved

    def setup(self, f: types.FrameType | None, tb: types.TracebackType | None) -> None:
        """Set up the stack without ddptui's and runpy's outermost frames.

        Post-mortem opens at the innermost frame of the user's code, not inside the library that
        raised (`down` still goes there): that is the line the user can change.
        """
        _ORIGINAL_PDB.setup(self, f, tb)
        hidden = 0
        while hidden < len(self.stack) - 1 and is_hidden(self.stack[hidden][0]):
            hidden += 1
        current = max(self.curindex - hidden, 0)
        self.stack = self.stack[hidden:]
        if f is None and tb is not None:
            user = [i for i, (frame, _) in enumerate(self.stack) if not is_library(frame.f_code.co_filename)]
            current = user[-1] if user else current
        if current != self.curindex:
            self.curindex = current
            self.curframe = self.stack[current][0]
            self.curframe_locals = self.curframe.f_locals

    def trace_dispatch(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        """bdb's trace function, which Python calls at every call of a Python function while pdb
        traces (`n` over a line that makes many calls), and at every line of a traced frame (`r`
        out of a loop); `bench/trace_overhead.py` times both, RankPdb against `pdb.Pdb` (about 0.4x).

        A call into, or a line of, a frame other than the one `n`, `r`, `unt` or `c` stops in, in
        a file without a breakpoint, stops nothing: bdb says so too, through four calls of Python
        methods each time. A call is then not traced; a line's frame goes on being traced.
        """
        stopframe = self.stopframe
        if (
            stopframe is not None
            and frame is not stopframe
            and (event == "call" or (event == "line" and not _DISABLE_EVENT))
            and self.botframe is not None
            and not self.quitting
        ):
            breaks = self.breaks  # bdb's break_anywhere / break_here: a breakpoint in the frame's file?
            known = self.fncache.get(frame.f_code.co_filename) if breaks else None  # the file's `canonic`
            if not breaks or (known is not None and known not in breaks):
                if event == "line":
                    return self.trace_dispatch
                if _DISABLE_EVENT:
                    self.disable_current_event()  # type: ignore[attr-defined]  # Python 3.14's bdb on sys.monitoring
                return None
        return _ORIGINAL_PDB.trace_dispatch(self, frame, event, arg)

    def stop_here(self, frame: types.FrameType) -> bool:
        """Never stop in ddptui's launcher, nor anywhere once detached (nor in a library after an
        interrupt: calls into one are then not traced).

        Asked at every call of a Python function while pdb traces (`n` over a forward pass: tens
        of thousands of times): a frame other than the one `n`, `r` or `c` stops in is answered
        first, as bdb answers it.
        """
        stopframe = self.stopframe
        if stopframe is not None and frame is not stopframe:
            return False
        if detached or is_hidden(frame):
            return False
        if self.user_code_only and is_library(frame.f_code.co_filename):
            return False
        return bool(_ORIGINAL_PDB.stop_here(self, frame))

    def break_here(self, frame: types.FrameType) -> bool:
        """Breakpoints stop nothing once detached; one that stops is remembered (bare `:skip`) and
        says so (`why`).

        bdb asks only where a step does not stop already: a stop it causes is the breakpoint's.
        """
        if detached or not _ORIGINAL_PDB.break_here(self, frame):
            return False
        Skips.stopped_at(frame.f_code.co_filename, frame.f_lineno)
        self.why = "breakpoint"
        return True

    def sigint_handler(self, signum: int, frame: Any) -> None:
        """Ctrl-C while the program runs (pdb's own handler after `c`, and `opening.on_interrupt`'s): stop
        at the next line of the user's code, not inside the library that runs."""
        if self.allow_kbdint:  # type: ignore[attr-defined]  # set in pdb.Pdb.__init__, not in its stubs
            raise KeyboardInterrupt
        self.message("\nProgram interrupted. (Use 'cont' to resume).")
        self.why = "interrupt"
        self.user_code_only = True  # the next line of the user's code: not inside torch or an import
        _ORIGINAL_PDB.set_trace(self, frame)

    def user_call(self, frame: types.FrameType, argument_list: Any) -> None:
        """After an interrupt, stop at a line, not at the `--Call--` of the user's code."""
        if not self.user_code_only:
            _ORIGINAL_PDB.user_call(self, frame, argument_list)

    def dispatch_return(self, frame: types.FrameType, arg: Any) -> Any:
        """Once the user's script returns into ddptui's launcher, stepping ends: the rank finishes.

        Otherwise `n` past the last line would stop in whatever library code the launcher runs next.
        """
        result = _ORIGINAL_PDB.dispatch_return(self, frame, arg)
        if frame.f_back is not None and is_hidden(frame.f_back) and not self.user_code_only:
            self.set_continue()
            return None
        return result

    def interaction(self, frame: Any, traceback: Any) -> None:
        """Enter the prompt (a traceback without a frame means post-mortem); requests see it."""
        global active
        if detached:
            return
        self.post_mortem = frame is None and traceback is not None
        if self.post_mortem:
            self.why = "post-mortem"
        self.user_code_only = False
        outer, active = active, self
        hold(self.stdout)  # the location, the `paused` mark and the prompt: one write
        try:
            _ORIGINAL_PDB.interaction(self, frame, traceback)
        finally:
            active = outer
            release(self.stdout)

    def preloop(self) -> None:
        """Show pdb's `display` expressions that changed, then report `paused`: the prompt opens."""
        if self._may_edit:
            buffer_prompts()
        if not self.use_rawinput:
            self._program_terminal = cook_terminal()
        if self.displaying.get(self.curframe):  # type: ignore[attr-defined]  # pdb's, not in its stubs
            release(self.stdout)  # evaluating them runs the program's code, which may print
        _ORIGINAL_PDB.preloop(self)
        self._report_paused()

    def precmd(self, line: str) -> str:
        """A command runs: what is held goes out first (a queued command runs without a prompt)."""
        release(self.stdout)
        return str(_ORIGINAL_PDB.precmd(self, line))

    def postcmd(self, stop: Any, line: str) -> Any:
        """Report `paused` again after a command that leaves the prompt open (p, w, l, ...).

        (`cmd.Cmd.postcmd` only returns `stop`.)
        """
        if not stop:
            hold(self.stdout)
            self._report_paused()
        return stop

    def postloop(self) -> None:
        """A command resumes the program (n, s, c, ...).

        No `running` event: the core marks a rank running as it types a command at its prompt
        (a broadcast, or Enter in the rank's pane); a command that leaves the prompt open says
        `paused` again (`postcmd`). One event a step instead of two.
        """
        release(self.stdout)
        self.why = ""
        if self._program_terminal is not None:
            restore_terminal(self._program_terminal)
            self._program_terminal = None
        if detached and _on_resume is not None:
            _on_resume()

    def do_clear(self, arg: str) -> None:
        """`clear` without an argument asks `Clear all breaks?` on the terminal: a command ddptui
        sends to every rank would leave each one at the question, which no broadcast answers (the
        ranks would be `waiting`, and `y` not sent: not at a prompt). Sent by ddptui, it clears them
        all and says which, as pdb does after a `y`; typed into a rank's pane, pdb asks."""
        if arg.strip() or not self._ddptui_types or getattr(self.stdin, "typed", False):
            _ORIGINAL_PDB.do_clear(self, arg)
            return
        cleared = [bp for bp in bdb.Breakpoint.bpbynumber if bp]
        self.clear_all_breaks()
        for bp in cleared:
            self.message(f"Deleted {bp}")

    do_cl = do_clear

    def still_paused(self) -> None:
        """Say `paused` again, on the link, from any thread: the prompt is still open, free again
        (an evaluation ddptui stopped waiting for has ended, so the core may resume the rank)."""
        self._report_paused(on_link=True)

    def do_interact(self, arg: str) -> None:
        """`interact` is a prompt too (Python's): the rank stays `paused` while it is open."""
        self._report_paused()
        _ORIGINAL_PDB.do_interact(self, arg)

    def _report_paused(self, on_link: bool = False) -> None:
        """Send where this rank's prompt is open, and how deep in the shown stack (`on_link`: on
        the link only, never in the terminal)."""
        frame = self.curframe
        if frame is None:
            return
        code = frame.f_code
        why, self.why = self.why, ""  # the stop's first event only: later ones are the same stop
        line = paused_line(
            code.co_filename, frame.f_lineno, code.co_name, self.post_mortem, self.curindex, why
        )
        # post-mortem: on the link, in order after the `exception` event it follows
        say_paused(line, self.stdout, self.post_mortem or on_link)
