"""`:compare`, watches, `:where` and the divergence guard in batch mode, on real ranks."""

from __future__ import annotations

from conftest import SCRIPTS, Runner, rank_lines, tagged_ranks


def block(stdout: str, command: str) -> list[str]:
    """The `ddptui:` lines printed after one command line."""
    after = stdout.split(f"(ddptui) {command}\n", 1)[1].split("(ddptui) ", 1)[0]
    return [line[len("ddptui: ") :] for line in after.splitlines() if line.startswith("ddptui: ")]


def test_compare_groups_ranks_by_value(ddptui: Runner) -> None:
    commands = [":compare same", ":compare layer.weight", ":compare loss", ':compare lookup["key"]']
    commands += [":compare close", ":compare --tol 1e-6 close", "c"]
    result = ddptui.batch(SCRIPTS / "unseeded.py", "\n".join(commands) + "\n", nproc=4, stall=5)
    same = block(result.stdout, ":compare same")
    assert same[0] == "all 4 ranks equal" and same[1].startswith("  ranks 0-3 │ tensor([2, 3], float32, cpu)")
    weights = block(result.stdout, ":compare layer.weight")
    assert weights[0] == "4 distinct values"
    hashes = {line.rsplit("hash=", 1)[1] for line in weights[1:]}
    assert len(hashes) == 4 and all(line.startswith("≠ rank ") for line in weights[1:])
    loss = block(result.stdout, ":compare loss")
    assert "≠ rank 1  │ nan" in loss and loss[-1].startswith("  by rank │ ▁×")
    lookup = block(result.stdout, ':compare lookup["key"]')
    assert lookup[0] == "3 distinct values, 1 error" and "≠ rank 2  │ raised KeyError: 'key'" in lookup
    assert block(result.stdout, ":compare close")[0] == "4 distinct values"
    assert block(result.stdout, ":compare --tol 1e-6 close")[:2] == [
        "all 4 ranks equal (tol 1e-06)",
        "  ranks 0-3 │ 1.0",
    ]
    assert result.returncode == 0


def test_ddp_construction_makes_unseeded_weights_equal(ddptui: Runner) -> None:
    commands = ":compare layer.weight\nc\n:compare model.module.weight\nc\n"
    result = ddptui.batch(SCRIPTS / "ddp_unseeded.py", commands, nproc=4, stall=5)
    assert block(result.stdout, ":compare layer.weight")[0] == "4 distinct values"
    assert block(result.stdout, ":compare model.module.weight")[0] == "all 4 ranks equal"
    assert result.returncode == 0, result.stdout


def test_watches_follow_every_step(ddptui: Runner) -> None:
    commands = ":watch counter * 10\nn\nn\n:watch\n:unwatch counter * 10\nn\nc\n"
    result = ddptui.batch(SCRIPTS / "unseeded.py", commands, nproc=2)
    values = [
        line.split("│ ")[1] for line in result.stdout.splitlines() if line.startswith("ddptui:   ranks 0-1")
    ]
    assert values == ["0", "10", "20"]
    assert block(result.stdout, ":watch") == ["counter * 10"]
    assert result.stdout.count("ddptui: watch counter * 10: all 2 ranks equal") == 3  # none after unwatch


def test_where_and_the_divergence_guard(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "diverge.py", ":where\nn\n!n\n:where\n!c\n", nproc=3)
    where = block(result.stdout, ":where")
    assert where == [
        "2 distinct location(s)",
        "ranks 1-2 │ paused at tests/scripts/diverge.py:13 (2)",
        "rank 0    │ paused at tests/scripts/diverge.py:10 (1)",
    ]
    assert block(result.stdout, "n") == [
        "not sent: the ranks stand at different places (0 at tests/scripts/diverge.py:10 · "
        "1-2 at tests/scripts/diverge.py:13); !n sends anyway"
    ]
    assert "-> if rank == world - 1:" in rank_lines(result.stdout.split("(ddptui) !n\n")[1], 0)


def ddp_check(ddptui: Runner, scenario: str) -> list[str]:
    """`:ddp-check` on a scenario of tests/scripts/ddp_checks.py (2 ranks)."""
    result = ddptui.run(
        "--stall-timeout",
        "5",
        "--batch",
        "-",
        str(SCRIPTS / "ddp_checks.py"),
        scenario,
        stdin=":ddp-check\nc\n",
    )
    return [*block(result.stdout, ":ddp-check"), result.stdout]


def test_ddp_check_names_parameters_without_gradient_also_under_torchs_error(ddptui: Runner) -> None:
    *said, out = ddp_check(ddptui, "unused")
    unused = "unused.weight, unused.bias"
    assert f"no gradient after backward on ranks 0-1: {unused}" in said[1]
    assert "parameters: equal on every rank (4 compared)" in said
    assert f"ddptui: DDP's 'Expected to have finished reduction' error: no gradient for {unused}" in out


def test_ddp_check_finds_a_parameter_nudged_on_one_rank(ddptui: Runner) -> None:
    *said, _ = ddp_check(ddptui, "nudged")
    assert "parameter used.bias differs across ranks: rank 0 | rank 1 (1 of 4 differ)" in said
    assert "gradients: equal on every rank (2 compared)" in said


def test_ddp_check_finds_gradients_that_differ(ddptui: Runner) -> None:
    *said, _ = ddp_check(ddptui, "grads")
    assert "parameters: equal on every rank (4 compared)" in said
    assert "gradient used.weight differs across ranks: rank 0 | rank 1 (1 of 2 differ)" in said


def test_groups_from_a_list_and_from_a_compare_row(ddptui: Runner) -> None:
    commands = ":compare value\n:group odd from-compare 2\n@odd p value\n"
    commands += ":group pair 0,2\n:ranks pair\np rank\n:group\nc\n"
    result = ddptui.batch(SCRIPTS / "steps.py", commands, nproc=3)
    assert block(result.stdout, ":group odd from-compare 2") == ["group odd: rank 1"]
    assert result.stdout.split("(ddptui) @odd p value\n")[1].splitlines()[0] == "[rank 1] 10"
    assert block(result.stdout, ":ranks pair") == ["target ranks: 0,2"]
    assert result.stdout.split("(ddptui) p rank\n")[1].splitlines()[:2] == ["[rank 0] 0", "[rank 2] 2"]
    assert block(result.stdout, ":group") == ["odd: rank 1", "pair: ranks 0,2"]


def test_compare_of_a_pending_collective_describes_it_and_the_job_lives(ddptui: Runner) -> None:
    commands = ":compare out\n:compare weight\np type(out).__name__\nc\n"
    result = ddptui.batch(SCRIPTS / "tp_compare.py", commands, nproc=2, stall=10)
    out = block(result.stdout, ":compare out")
    assert out[0] == "all 2 ranks equal", result.stdout
    assert "tensor([2, 4], float32, cpu, requires_grad) [pending collective, not waited on]" in out[1]
    weight = block(result.stdout, ":compare weight")
    assert weight[0] == "no replicas to compare; shards differ along tp by design (Shard(dim=0))"
    shard = "tensor([8, 8], float32, cpu, local shard) of DTensor [16, 8] (Shard(dim=0)) on mesh tp=2"
    assert weight[1].startswith(f"  rank 0  │ {shard}") and weight[2].startswith(f"  rank 1  │ {shard}")
    assert "[ranks 0-1] 'AsyncCollectiveTensor'" in result.stdout
    assert "rank 0: exited 0" in result.stdout and "rank 1: exited 0" in result.stdout
    assert result.returncode == 0, result.stdout


def numbers(stdout: str, command: str) -> dict[int, float]:
    """Each rank's number in a `:compare` table of one command (its rows `rank 0 │ 1.5`)."""
    found: dict[int, float] = {}
    for line in block(stdout, command)[1:]:
        label, sep, value = line[2:].partition(" │ ")
        if sep and label.strip() != "by rank":
            for rank in tagged_ranks(f"[{label.strip()}]"):
                found[rank] = float(value)
    return found


SLEEP_THEN_CHANGE = ':compare __import__("time").sleep(6) or log.append("eval")'


def test_an_evaluation_stopped_at_its_time_does_not_run_on(ddptui: Runner) -> None:
    commands = f"{SLEEP_THEN_CHANGE}\nc\n"
    result = ddptui.run(
        "--nproc-per-node", "2", "--batch", "-", str(SCRIPTS / "evaluations.py"), "3", stdin=commands
    )
    for rank in (0, 1):  # not `['program', 'eval']`: nothing appended after the program resumed
        assert f"rank {rank} log ['program']" in rank_lines(result.stdout, rank), result.stdout
    assert block(result.stdout, SLEEP_THEN_CHANGE) == ["2 errors", "  ranks 0-1 │ raised stopped after 5 s"]
    assert result.returncode == 0, result.stdout


THREADS = (
    ':compare min(len(__import__("threading").enumerate()) for _ in range(8) '
    'if not __import__("time").sleep(0.05))'
)
"""A rank's threads, the fewest over 0.4 s: the requests the core makes after a step come and go."""
CLOCK = ':compare __import__("time").monotonic()'
HANGS = '__import__("time").sleep(60)'


def test_a_hanging_watch_neither_slows_later_steps_nor_leaks_threads(ddptui: Runner) -> None:
    commands = [THREADS, f":watch {HANGS}", CLOCK, "n", "n", f"{CLOCK} + 0", THREADS, "n", "n", THREADS]
    commands += [":unwatch all", THREADS, "c"]
    result = ddptui.batch(SCRIPTS / "evaluations.py", "\n".join(commands) + "\n", nproc=2)
    out = result.stdout
    before, after = numbers(out, CLOCK), numbers(out, f"{CLOCK} + 0")
    assert max(after[rank] - before[rank] for rank in (0, 1)) < 4, (before, after)  # 2 steps, not 2 x 5 s
    counts = out.split(f"(ddptui) {THREADS}\n")[1:]
    assert len(counts) == 4 and len({block(f"(ddptui) {THREADS}\n{c}", THREADS)[1] for c in counts}) == 1, out
    assert block(out, f":watch {HANGS}") == [
        f"watch {HANGS}: 2 errors",
        "  ranks 0-1 │ raised stopped after 5 s",
    ]
    halted = (
        f"watch {HANGS}: not evaluated since it took 5 s on ranks 0-1 (:watch {HANGS} evaluates it again)"
    )
    assert block(out, "n") == [halted], out
    assert result.returncode == 0, out


HELD = ':compare __import__("os").system("sleep 8") or log.append("eval")'


def test_an_evaluation_that_cannot_be_stopped_holds_the_ranks_resume_until_it_ends(ddptui: Runner) -> None:
    commands = [":ranks 1", HELD, ":compare step", "c", ":ranks 0", 'p __import__("time").sleep(4)']
    commands += [":ranks all", "c"]
    result = ddptui.batch(SCRIPTS / "evaluations.py", "\n".join(commands) + "\n", nproc=2, stall=10)
    out = result.stdout
    assert "rank 1 log ['eval', 'program']" in rank_lines(out, 1), out  # it ended, then the program went on
    said = "raised still running after 5 s (C code that takes no stop); its n, c, ... wait until it ends"
    assert block(out, HELD) == ["1 error", f"  rank 1  │ {said}"], out
    assert block(out, ":compare step")[1].startswith("  rank 1  │ raised still running: the one asked"), out
    expr = HELD.removeprefix(":compare ")
    assert block(out, "c")[0] == f"c not sent to rank 1: its evaluation of {expr} still runs; !c sends anyway"
    assert "rank 0 log ['program']" in rank_lines(out, 0), out
    assert result.returncode == 0, out
