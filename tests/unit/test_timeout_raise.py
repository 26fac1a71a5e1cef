"""The timeout raise on a stand-in `distributed_c10d` (no torch), its import hook, and the option."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ddptui.cli.options import UsageError, parse_spec
from ddptui.core.transport.launch import LaunchSpec, Link, rank_env
from ddptui.rank import collectives, flight_recorder, timeouts

LIMIT = 7200.0
"""The raise in these tests, in seconds: above torch's defaults (30 min; NCCL 10 min)."""


class FakeGroup:
    """What the raise reads of a process group."""

    def __init__(self, name: str) -> None:
        self.group_name = name


def populate(module: types.ModuleType) -> None:
    """Give `module` what the raise touches in torch's `distributed_c10d`, with torch's signatures.

    Each group made, and each `_set_pg_timeout`, appends the timeout torch would use to `applied`.
    """
    world = types.SimpleNamespace(pg_names={}, pg_map={})
    applied: list[Any] = []

    def make(backend: str | None, timeout: Any) -> FakeGroup:
        if timeout is None:  # torch's _get_default_timeout reads the module's defaults at each call
            nccl = module.default_pg_nccl_timeout
            timeout = nccl if backend == "nccl" and nccl is not None else module.default_pg_timeout
        group = FakeGroup(str(len(world.pg_names)))
        world.pg_names[group] = group.group_name
        world.pg_map[group] = (backend or "gloo", None)
        applied.append(timeout)
        return group

    def init_process_group(
        backend: str | None = None,
        init_method: str | None = None,
        timeout: timedelta | None = None,
        world_size: int = -1,
        rank: int = -1,
        store: object = None,
        group_name: str = "",
        pg_options: object = None,
        device_id: object = None,
    ) -> None:
        make(backend, timeout)

    def new_group(
        ranks: list[int] | None = None,
        timeout: timedelta | None = None,
        backend: str | None = None,
        pg_options: object = None,
        use_local_synchronization: bool = False,
        group_desc: str | None = None,
        device_id: object = None,
    ) -> FakeGroup:
        return make(backend, timeout)

    def _set_pg_timeout(timeout: timedelta, group: FakeGroup | None = None) -> None:
        applied.append(timeout)

    def all_reduce(tensor: object, op: object = None, group: object = None, async_op: bool = False) -> None:
        return None

    module.__dict__.update(
        default_pg_timeout=timedelta(minutes=30),
        default_pg_nccl_timeout=timedelta(minutes=10),
        _world=world,
        applied=applied,
        init_process_group=init_process_group,
        new_group=new_group,
        _set_pg_timeout=_set_pg_timeout,
        all_reduce=all_reduce,
        _get_default_group=lambda: next(iter(world.pg_names)),
    )


@pytest.fixture
def c10d(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """A stand-in c10d with the raise (to LIMIT) installed; everything undone after."""
    module = types.ModuleType(timeouts.C10D)
    populate(module)
    monkeypatch.setenv(timeouts.PG_TIMEOUT_ENV, str(LIMIT))
    monkeypatch.setitem(sys.modules, timeouts.C10D, module)
    monkeypatch.delitem(sys.modules, "torch.distributed", raising=False)
    assert timeouts.install()
    yield module
    timeouts.uninstall()


def seconds(applied: list[Any]) -> list[float]:
    """The timeouts torch was handed, in seconds."""
    return [timeout.total_seconds() for timeout in applied]


def test_an_explicit_timeout_is_raised_and_the_asked_one_kept(c10d: types.ModuleType) -> None:
    c10d.init_process_group("gloo", timeout=timedelta(seconds=5))
    c10d.new_group([0, 1], timedelta(seconds=4))  # positional, as torch allows
    assert seconds(c10d.applied) == [LIMIT, LIMIT]
    assert timeouts.user_timeouts() == {"0": 5.0, "1": 4.0}


def test_without_a_timeout_the_default_is_raised_and_torchs_kept(c10d: types.ModuleType) -> None:
    c10d.init_process_group("gloo")
    c10d.new_group(backend="nccl")
    assert seconds(c10d.applied) == [LIMIT, LIMIT]
    assert timeouts.user_timeouts() == {"0": 1800.0, "1": 600.0}


def test_a_longer_timeout_is_the_jobs_own(c10d: types.ModuleType) -> None:
    c10d.init_process_group("gloo", timeout=timedelta(hours=3))
    assert seconds(c10d.applied) == [10800.0]
    assert timeouts.user_timeouts() == {}


def test_a_raise_shorter_than_torchs_default_lowers_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType(timeouts.C10D)
    populate(module)
    monkeypatch.setenv(timeouts.PG_TIMEOUT_ENV, "3")
    monkeypatch.setitem(sys.modules, timeouts.C10D, module)
    assert timeouts.install(module)
    try:
        module.init_process_group("gloo")
        module.new_group(timeout=timedelta(seconds=2))
        assert seconds(module.applied) == [1800.0, 3.0]
        assert timeouts.user_timeouts() == {"1": 2.0}
    finally:
        timeouts.uninstall()


def test_set_pg_timeout_never_lowers_the_raise(c10d: types.ModuleType) -> None:
    c10d.init_process_group("gloo", timeout=timedelta(seconds=5))
    c10d._set_pg_timeout(timedelta(seconds=60))  # what torch.distributed.breakpoint(timeout_s=60) does
    assert seconds(c10d.applied)[-1] == LIMIT
    assert timeouts.user_timeouts() == {"0": 60.0}
    c10d._set_pg_timeout(timedelta(seconds=9000), group=next(iter(c10d._world.pg_names)))
    assert seconds(c10d.applied)[-1] == 9000.0
    assert timeouts.user_timeouts() == {}


def test_only_live_groups_are_reported(c10d: types.ModuleType) -> None:
    c10d.init_process_group("gloo", timeout=timedelta(seconds=5))
    c10d._world.pg_names.clear()  # destroy_process_group
    assert timeouts.user_timeouts() == {}


def test_arguments_torch_rejects_reach_it_unchanged(c10d: types.ModuleType) -> None:
    c10d.init_process_group("gloo", timeout=5)  # torch raises: the timeout must be a timedelta
    with pytest.raises(TypeError):
        c10d.new_group(nonsense=1)
    assert c10d.applied == [5]
    assert timeouts.user_timeouts() == {}


def test_uninstall_puts_torch_back(c10d: types.ModuleType) -> None:
    wrapper = c10d.init_process_group
    assert c10d.default_pg_timeout == timedelta(seconds=LIMIT)
    timeouts.uninstall()
    assert c10d.init_process_group is wrapper.__wrapped__
    assert c10d.default_pg_timeout == timedelta(minutes=30)
    assert c10d.default_pg_nccl_timeout == timedelta(minutes=10)


class FakeLoader(importlib.abc.Loader):
    """Loads the stand-in c10d as if it were torch's file."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        """The default module."""
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        """Define what the raise and the collective wrappers look for."""
        populate(module)


class FakeFinder:
    """Finds the stand-in c10d, after every other finder."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        """A spec for the stand-in c10d; None for anything else."""
        return importlib.util.spec_from_loader(name, FakeLoader()) if name == timeouts.C10D else None


@pytest.fixture
def stand_in_torch(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """torch and torch.distributed as empty packages, c10d not imported yet; hooks removed after."""
    for name in ("torch", "torch.distributed"):
        package = types.ModuleType(name)
        package.__path__ = []
        monkeypatch.setitem(sys.modules, name, package)
    for name in (timeouts.C10D, flight_recorder.C10D_C):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setenv(timeouts.PG_TIMEOUT_ENV, str(LIMIT))
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, FakeFinder()])
    yield
    timeouts.uninstall()
    collectives.uninstall_wrappers()


@pytest.mark.parametrize("timeouts_first", [True, False])
def test_the_import_hook_lives_beside_the_collective_wrappers(
    stand_in_torch: None, timeouts_first: bool
) -> None:
    hooks = [timeouts.install_on_import, collectives.install_wrappers_on_import]
    for install in hooks if timeouts_first else reversed(hooks):
        install()
    module = importlib.import_module(timeouts.C10D)
    assert module.default_pg_timeout == timedelta(seconds=LIMIT)
    assert getattr(module.init_process_group, "__wrapped__", None) is not None
    assert getattr(module.all_reduce, "__wrapped__", None) is not None, "the collective wrappers are in too"
    hooks_left = [f for f in sys.meta_path if getattr(f, "name", None) == timeouts.C10D]
    assert hooks_left == [], "each hook goes once torch.distributed is in"
    module.init_process_group("gloo", timeout=timedelta(seconds=5))
    assert timeouts.user_timeouts() == {"0": 5.0}


@pytest.mark.parametrize(
    ("text", "expected"),
    [("30", 30.0), ("0.5", 0.5), ("", timeouts.DEFAULT_PG_TIMEOUT), ("soon", timeouts.DEFAULT_PG_TIMEOUT)]
    + [(bad, timeouts.DEFAULT_PG_TIMEOUT) for bad in ("0", "-4", "inf", "nan")],
)
def test_the_raise_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, text: str, expected: float
) -> None:
    monkeypatch.setenv(timeouts.PG_TIMEOUT_ENV, text)
    assert timeouts.pg_timeout() == expected


def test_pg_timeout_option_reaches_the_ranks_environment(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    spec, _ = parse_spec(["--pg-timeout", "90", str(script)])
    assert spec.pg_timeout == 90.0
    env = rank_env(spec, 0, 29500, "run", Link("/s", "/d", "t"))
    assert env[timeouts.PG_TIMEOUT_ENV] == "90.0"
    assert (
        rank_env(LaunchSpec(str(script)), 0, 1, "r", Link("/s", "/d", "t"))[timeouts.PG_TIMEOUT_ENV]
        == "86400.0"
    )


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf"])
def test_pg_timeout_option_must_be_positive_and_finite(tmp_path: Path, bad: str) -> None:
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    with pytest.raises(UsageError, match=f"^--pg-timeout must be a positive number of seconds, not {bad}"):
        parse_spec(["--pg-timeout", bad, str(script)])
