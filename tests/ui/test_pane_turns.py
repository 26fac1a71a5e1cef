"""PaneTurns: keys hold flooding panes' repaints back, not a pane whose flood ended."""

from __future__ import annotations

from time import monotonic

from ddptui.ui.pane_turns import PaneTurns


def test_a_flood_that_ended_repaints_while_keys_hold_the_others() -> None:
    turns = PaneTurns()
    turns.take_flood_turn(monotonic() - 0.2)  # panes were repainting a flood
    turns.key_pressed()
    now = monotonic()
    assert not turns.flood_due(now, painted=now - 1, fed_at=now)  # still flooding: held
    assert turns.flood_due(now, painted=now - 1, fed_at=now - 0.2)  # quiet: shown now
    turns.take_flood_turn(now)
    assert not turns.flood_due(now + 0.001, painted=now - 1, fed_at=now - 0.2)  # one per slot
    later = now + turns.FLOOD_SLOT + 0.001
    assert turns.flood_due(later, painted=now - 1, fed_at=now - 0.2)
    assert not turns.flood_due(later, painted=now - 1, fed_at=later)  # the key still holds floods
    after = now + turns.KEY_QUIET + 0.001
    assert turns.flood_due(after, painted=now - 1, fed_at=after)
