"""Merged stacks on hand-made stacks: grouping, odd branches, folded library frames, collectives, lines."""

from __future__ import annotations

import sysconfig

from ddptui.core.diagnosis.collective_records import Record
from ddptui.core.diagnosis.stack_tree import (
    MAX_FRAMES,
    Node,
    Stop,
    annotation,
    dump_frames,
    main_frames,
    merge,
    placeholder,
    render,
)
from ddptui.core.transport.interface import RequestError
from ddptui.rank.asks import Stack
from ddptui.rank.protocol import Frame

TORCH = "/venv/lib/python3.11/site-packages/torch/distributed/"
STDLIB = sysconfig.get_paths()["stdlib"] + "/"
MODULE = Frame("train.py", 20, "<module>")
ALL_REDUCE = [
    MODULE,
    Frame("train.py", 10, "main"),
    Frame(TORCH + "c10d_logger.py", 81, "wrapper"),
    Frame(TORCH + "distributed_c10d.py", 2900, "all_reduce"),
]
SLEEP = [MODULE, Frame("train.py", 11, "main")]
PENDING = Record(5, "all_reduce", shapes=((3,),), dtypes=("float32",), state="issued")


def hang() -> dict[int, list[Frame]]:
    """Ranks 0-2 in all_reduce at train.py:10, rank 3 asleep at train.py:11."""
    return {0: ALL_REDUCE, 1: ALL_REDUCE, 2: ALL_REDUCE, 3: SLEEP}


def child(node: Node, func: str, line: int | None = None) -> Node:
    """The one child of `node` in `func` (at `line`)."""
    (found,) = [c for c in node.children if c.frame and c.frame.func == func and line in (None, c.frame.line)]
    return found


def test_a_hang_groups_the_waiting_ranks_and_marks_the_sleeper_odd() -> None:
    root = merge(hang(), {0: PENDING, 1: PENDING, 2: PENDING})
    assert root.frame is None and root.ranks == {0, 1, 2, 3} and not root.stops
    (module,) = root.children
    assert module.frame == MODULE and module.ranks == {0, 1, 2, 3} and not module.odd
    waiting, sleeping = module.children  # largest group first
    assert waiting.frame == Frame("train.py", 10, "main") and waiting.ranks == {0, 1, 2}
    assert not waiting.odd
    assert sleeping.frame == Frame("train.py", 11, "main") and sleeping.ranks == {3} and sleeping.odd
    assert sleeping.stops == (Stop(frozenset({3})),) and not sleeping.children
    leaf = child(child(waiting, "wrapper"), "all_reduce")
    assert leaf.stops == (Stop(frozenset({0, 1, 2}), "#5 all_reduce [3] float32"),)


def test_render_is_an_indented_tree_with_the_odd_branch_marked() -> None:
    lines = render(merge(hang(), {0: PENDING, 1: PENDING, 2: PENDING}))
    assert lines == [
        "ranks 0-3: 2 different stacks",
        "<module> (train.py:20) [ranks 0-3]",
        "├─ main (train.py:10) [ranks 0-2]",
        "│  wrapper (torch/distributed/c10d_logger.py:81) [ranks 0-2]",
        "│  all_reduce (torch/distributed/distributed_c10d.py:2900) [ranks 0-2] · #5 all_reduce [3] float32",
        "└─ ≠ main (train.py:11) [rank 3]",
    ]


def test_ties_are_not_odd_and_one_stack_says_so() -> None:
    root = merge({0: ALL_REDUCE, 1: SLEEP})
    assert not any(c.odd for c in root.children[0].children)
    assert render(merge({0: SLEEP, 1: SLEEP}))[0] == "ranks 0-1: one stack"
    assert render(merge({})) == ["no ranks"]


def test_runs_of_library_frames_fold_but_the_innermost_frame_stays() -> None:
    deep = [
        *ALL_REDUCE[:2],
        Frame(TORCH + "a.py", 1, "a"),
        Frame(TORCH + "b.py", 2, "b"),
        Frame(TORCH + "c.py", 3, "c"),
        ALL_REDUCE[-1],
    ]
    folded = merge({0: deep, 1: deep})
    run = folded.children[0].children[0].children[0]
    assert run.frame is None and run.hidden == tuple(deep[2:5]) and run.ranks == {0, 1}
    assert run.children[0].frame == deep[-1]
    assert "… 3 library frames [ranks 0-1]" in render(folded)[3]
    unfolded = merge({0: deep, 1: deep}, collapse=False)
    assert [line.split(" (")[0] for line in render(unfolded)[1:]] == [
        "<module>",
        "main",
        "a",
        "b",
        "c",
        "all_reduce",
    ]


def test_a_library_fork_and_user_callbacks_stay_visible() -> None:
    forward = Frame("model.py", 5, "forward")
    call = [Frame(STDLIB + "threading.py", 1, "run"), Frame(STDLIB + "threading.py", 2, "_bootstrap")]
    one = [MODULE, *call, Frame(STDLIB + "x.py", 1, "fork"), forward]
    two = [MODULE, *call, Frame(STDLIB + "x.py", 1, "fork"), Frame("model.py", 9, "other")]
    lines = render(merge({0: one, 1: two}))
    assert lines[2].endswith("… 2 library frames [ranks 0-1]")
    assert "fork (x.py:1) [ranks 0-1]" in lines[3]  # where the ranks part, inside the library
    assert "forward (model.py:5) [rank 0]" in lines[4] and "other (model.py:9) [rank 1]" in lines[5]


def test_a_rank_stopping_where_others_go_on_is_its_own_branch() -> None:
    paused = ALL_REDUCE[:2]  # at its prompt on the all_reduce line
    root = merge({0: paused, 1: ALL_REDUCE, 2: ALL_REDUCE}, {1: PENDING, 2: PENDING})
    main = root.children[0].children[0]
    assert main.stops == (Stop(frozenset({0}), "", odd=True),)
    lines = render(root)
    assert lines[-1] == "└─ ≠ stops here [rank 0]"


def test_ranks_in_different_collectives_at_one_place_part_there() -> None:
    other = Record(4, "all_reduce", shapes=((3,),), dtypes=("float32",), state="issued")
    root = merge({0: ALL_REDUCE, 1: ALL_REDUCE, 2: ALL_REDUCE}, {0: PENDING, 1: PENDING, 2: other})
    lines = render(root)
    assert lines[-2].endswith("├─ #5 all_reduce [3] float32 [ranks 0-1]")
    assert lines[-1].endswith("└─ ≠ #4 all_reduce [3] float32 [rank 2]")


def test_only_pending_collectives_are_named() -> None:
    done = Record(5, "all_reduce", state="completed")
    assert annotation(done) == "" and annotation(None) == ""
    assert annotation(Record(2, "broadcast", pg="1", state="started")) == "#2 on group 1 broadcast"
    leaf = child(child(merge({0: ALL_REDUCE}, {0: done}).children[0], "main"), "wrapper").children[0]
    assert leaf.stops == (Stop(frozenset({0})),)


def test_placeholders_and_escapes() -> None:
    root = merge({0: SLEEP, 1: SLEEP, 2: [placeholder("exited 0")], 3: [placeholder("no answer: timeout")]})
    lines = render(root)
    assert "├─ ≠ <exited 0> [rank 2]" in lines and "└─ ≠ <no answer: timeout> [rank 3]" in lines
    evil = [Frame("\x1b]52;c;aGk=\x07.py", 1, "f\x1b[2J")]
    assert "\x1b" not in "".join(render(merge({0: evil})))


def test_deep_recursion_is_cut_and_lines_to_the_width() -> None:
    deep = [Frame("r.py", 3, "recurse")] * 5000
    root = merge({0: deep, 1: deep})
    lines = render(root, width=40)
    assert len(lines) == 1 + MAX_FRAMES
    assert lines[21] == "<… 4801 frames left out> [ranks 0-1]"
    assert max(map(len, lines)) <= 36
    assert render(root, width=20)[1] == "recurse (r.py:3) [r…"


def test_stack_answers_and_dumps_become_frames() -> None:
    value = [
        {"name": "ddptui-request", "main": False, "ddptui": True, "frames": [["x.py", 1, "t"]]},
        {
            "name": "MainThread",
            "main": True,
            "ddptui": False,
            "frames": [["a.py", 1, "<module>"], ["a.py", 5, "f"]],
        },
    ]
    answer = Stack().read_reply(value)
    assert main_frames(answer) == [Frame("a.py", 1, "<module>"), Frame("a.py", 5, "f")]
    assert main_frames(answer[:1]) == "no answer: no main thread"
    assert main_frames(RequestError("no reply in time")) == "no answer: no reply in time"
    assert main_frames(RequestError("boom", by_rank=True)) == "no answer: boom"
    empty = main_frames(Stack().read_reply([{"name": "M", "main": True, "ddptui": False, "frames": []}]))
    assert empty == [placeholder("no frame of the user's code")]
    dump = (
        "Thread 0x00007f01 (most recent call first):\n"
        '  File "/usr/lib/python3.11/threading.py", line 320 in wait\n\n'
        "Current thread 0x00007f00 (most recent call first):\n"
        '  File "/work/train.py", line 11 in main\n'
        '  File "/work/train.py", line 20 in <module>\n'
        '  File "<frozen runpy>", line 88 in _run_code\n'
    )
    assert dump_frames(dump) == [Frame("/work/train.py", 20, "<module>"), Frame("/work/train.py", 11, "main")]
    assert dump_frames("") == []
