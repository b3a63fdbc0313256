"""Clearing the state built aside also removes what a killed run left renamed."""

from pathlib import Path

from ledger.edges.files.asidestate import AsideState
from ledger.edges.files.statefile import StateFile


def test_a_folder_a_killed_rebuild_left_renamed_is_removed_by_the_next_clear(
    tmp_path: Path,
) -> None:
    """A run killed inside ``remove_tree`` leaves ``.rebuild.old-PID``; the next run removes it."""
    state = tmp_path / "state"
    left = state / ".rebuild.old-4242"
    (left / "nested").mkdir(parents=True)
    (left / "nested" / "derived.json").write_text("{}")
    live_file = state / "derived.json"
    live_file.write_text("{}")
    aside = AsideState(StateFile(state, tmp_path / "state-mac.key"))
    (aside.directory).mkdir()
    (aside.directory / "derived.json").write_text("{}")

    aside.clear()

    assert not left.exists()
    assert not aside.directory.exists()
    assert live_file.read_text() == "{}"  # the live state is not touched
