"""The fixture folder the intake tests build a memory from, written in the test."""

from __future__ import annotations

from pathlib import Path

OVERVIEW = """# Overview
The service in one page. #ops

## Goals
Keep it running.
"""
RUNBOOK = """# Runbook
See [[00-overview]] for context.
Then read [[Overview|the overview]] and [[00-overview#Goals]].

## Steps
Follow [the guide](sub/guide.md) and [[later-note]].
Two so named, the nearest: [[notes]].
"""
GUIDE = """# Guide
Back to the [runbook](../01-runbook.md). Not [outside](../../etc/passwd.md).
"""
NOTES_A = "# Notes A\nfirst\n"
NOTES_B = "# Notes B\nsecond\n"
PLAIN = "plain text file without headings\n\nsecond paragraph\n"

FILES: dict[str, bytes] = {
    "00-overview.md": OVERVIEW.encode(),
    "01-runbook.md": RUNBOOK.encode(),
    "sub/guide.md": GUIDE.encode(),
    "sub/notes.md": NOTES_A.encode(),
    "other/notes.md": NOTES_B.encode(),
    "plain.txt": PLAIN.encode(),
    "image.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    "latin1.txt": "caf\xe9 au lait\n".encode("latin-1"),
}
# Paths whose records intake writes from the folder (the image as an attachment).
RECORDED = sorted(FILES)


def write_folder(root: Path, outside: Path | None = None) -> Path:
    """The fixture folder under `root`, with a link to `outside` it must not follow;
    without `outside`, only its files of valid UTF-8 text (what a remote agent sends)."""
    folder = root / "notes"
    for rel, data in FILES.items():
        if outside is None and rel in ("image.png", "latin1.txt"):
            continue
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    if outside is None:
        return folder
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.md").write_text("# Secret\nnot for memory\n")
    (folder / "leak.md").symlink_to(outside / "secret.md")
    return folder


# A lane closed to every path but a.md, and a lane whose own source type refuses folders.
CLOSED = """
lanes:
  notes:
    source_types:
      documentary:
        authority: documentary
        allowed_labels:
          [folder, folder_id, file_id, { label: path, values: [a.md] }, size, modified,
           sha256, part, offset]
  strict:
    source_types:
      memo: { authority: documentary, allowed_labels: [topic] }
agents:
  writer: { read: [notes, strict], write: [notes, strict] }
  reader: { read: [notes], write: [] }
"""
