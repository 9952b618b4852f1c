"""The intake page shows `edgeloom intake` under the development policy exactly as it
prints, over the vault `tests/intake/test_vault.py` builds."""

from __future__ import annotations

from pathlib import Path

from tests.docs_pages import blocks
from tests.intake.test_vault import write_vault
from tests.support import Gateway
from tests.test_cli import edgeloom


async def test_the_intake_page_shows_what_the_command_prints(
    gateway: Gateway, tmp_path: Path
) -> None:
    folder = write_vault(tmp_path / "notes")
    status, out, err = await edgeloom(
        gateway.database_url, "intake", str(folder), "--lane", "default"
    )
    assert status == 0, (out, err)
    shown = [b.text for b in blocks("text") if b.page == "docs/intake.md"][0]
    assert out == shown, out
