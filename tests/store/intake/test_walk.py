"""Walking a folder: relative paths, nothing outside it, bad files skipped and listed."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from store.intake.walk import Attachment, Skipped, Text, decode, read, text_hash, walk


def tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def test_files_come_sorted_by_relative_path_with_size_and_time(tmp_path: Path) -> None:
    tree(tmp_path, {"b.md": b"bb", "a.md": b"a", "sub/c.txt": b"ccc", "sub/deep/d.md": b""})
    os.utime(tmp_path / "a.md", ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    walked = walk(tmp_path)
    assert [f.path for f in walked.files] == ["a.md", "b.md", "sub/c.txt", "sub/deep/d.md"]
    assert [f.size for f in walked.files] == [1, 2, 3, 0]
    # To the microsecond.
    assert walked.files[0].modified_at.timestamp() == pytest.approx(1_700_000_000.123456)
    assert walked.files[0].modified_at.microsecond == 123456
    assert walked.skipped == ()


def test_hidden_entries_are_left_out(tmp_path: Path) -> None:
    tree(tmp_path, {".git/config": b"x", ".hidden.md": b"x", "kept.md": b"x"})
    assert [f.path for f in walk(tmp_path).files] == ["kept.md"]


def test_links_out_of_the_folder_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    root = tmp_path / "notes"
    tree(outside, {"secret.md": b"secret", "dir/x.md": b"x"})
    tree(root, {"a.md": b"a"})
    (root / "out.md").symlink_to(outside / "secret.md")
    (root / "outdir").symlink_to(outside / "dir")
    (root / "in.md").symlink_to(root / "a.md")
    (root / "broken.md").symlink_to(root / "nothing.md")
    walked = walk(root)
    assert [f.path for f in walked.files] == ["a.md", "in.md"]
    assert walked.skipped == (
        Skipped("broken.md", "a broken link"),
        Skipped("out.md", "a link pointing outside the folder (not followed)"),
        Skipped("outdir", "a link to a folder (not followed)"),
    )


def test_attachments_are_kept_by_hash_and_bad_utf8_is_read_per_file(tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00"
    files = {"img.png": png, "bad.txt": b"caf\xe9 ok", "blob.bin": b"a\x00b", "doc.pdf": b"%PDF"}
    tree(tmp_path, files)
    walked = walk(tmp_path)
    by_path = {f.path: f for f in walked.files}
    # By their kind, whatever their bytes, or because their bytes hold a NUL.
    assert read(tmp_path, by_path["img.png"]) == Attachment(
        hashlib.sha256(png).hexdigest(), "image/png"
    )
    assert read(tmp_path, by_path["doc.pdf"]) == Attachment(
        hashlib.sha256(b"%PDF").hexdigest(), "application/pdf"
    )
    assert read(tmp_path, by_path["blob.bin"]) == Attachment(
        hashlib.sha256(b"a\x00b").hexdigest(), "application/octet-stream"
    )
    text = read(tmp_path, by_path["bad.txt"])
    assert isinstance(text, Text)
    assert text.content == "caf\ufffd ok"
    assert text.note == "not valid UTF-8 (first bad byte at 3); bad bytes read as U+FFFD"
    assert text.sha256 == hashlib.sha256(b"caf\xe9 ok").hexdigest()


def test_an_unreadable_file_is_skipped_with_why(tmp_path: Path) -> None:
    tree(tmp_path, {"locked.md": b"x"})
    found = walk(tmp_path).files[0]
    (tmp_path / "locked.md").unlink()
    skipped = read(tmp_path, found)
    assert isinstance(skipped, Skipped) and skipped.reason.startswith("unreadable: ")


def test_text_sent_as_text_hashes_as_the_same_file_on_disk() -> None:
    text = decode("Überblick [[b]]".encode())
    assert isinstance(text, Text) and text.note is None
    assert text.sha256 == text_hash("Überblick [[b]]")


def test_a_path_that_is_no_folder_is_refused(tmp_path: Path) -> None:
    tree(tmp_path, {"a.md": b"a"})
    with pytest.raises(NotADirectoryError):
        walk(tmp_path / "a.md")
    with pytest.raises(FileNotFoundError):
        walk(tmp_path / "missing")
