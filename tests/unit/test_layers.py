"""The layer contract: the core never imports textual, the rank side only the standard library."""

import subprocess
import sys

CHECK = """
import sys
{imports}
bad = sorted(m.split('.')[0] for m in sys.modules if m.split('.')[0] in {forbidden!r})
print(','.join(sorted(set(bad))))
"""


def loaded(imports: str, forbidden: set[str]) -> str:
    """Import modules in a fresh interpreter and list which forbidden packages came along."""
    code = CHECK.format(imports=imports, forbidden=forbidden)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_core_and_batch_do_not_import_the_ui_or_torch() -> None:
    imports = (
        "import ddptui.cli, ddptui.core.session.session, ddptui.core.commands.batch, "
        "ddptui.core.detach.host, ddptui.core.detach.main"
    )
    assert loaded(imports, {"textual", "pyte", "torch", "ddptui.ui"}) == ""


def test_rank_side_is_standard_library_only() -> None:
    code = (
        "import sys; before = set(sys.modules); "
        "import ddptui.rank.debugger, ddptui.rank.link, ddptui.rank.requests, ddptui.rank.__main__; "
        "import ddptui.rank.wrapped, ddptui.rank.relay, ddptui.rank.spawns; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
        "extra = {m for m in new - set(sys.stdlib_module_names) - {'ddptui'} "
        "if not m.startswith('_sysconfigdata')}; "
        "print(','.join(sorted(extra)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""
