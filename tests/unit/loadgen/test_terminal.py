"""Text from peers made safe to print; warnings of one kind capped."""

from loadgen.terminal import CappedWarnings, printable


def test_printable_keeps_plain_text() -> None:
    assert printable("HTTP 500 Internal Server Error: ünïcode ✓") == (
        "HTTP 500 Internal Server Error: ünïcode ✓"
    )


def test_printable_drops_escape_sequences_and_controls() -> None:
    forged = "\x1b[31mred\x1b[0m \x1b]0;pwned title\x07bell\x07 \x1b]8;;http://x\x1b\\link\x9b2J"
    assert printable(forged) == "red bell link"


def test_printable_makes_one_line() -> None:
    assert printable("line one\r\nerror: forged line\tand\x00nul") == (
        "line one error: forged line andnul"
    )


def test_printable_of_a_non_string() -> None:
    assert printable(404) == "404"


def test_capped_warnings_print_five_then_count() -> None:
    lines: list[str] = []
    warnings = CappedWarnings(sink=lines.append)
    printed = [warnings.warn("dropped messages", f"dropped \x1b[2J{i}") for i in range(8)]
    warnings.warn("refused keys", "refused one")
    assert printed == [True] * 5 + [False] * 3
    assert lines[0] == "warning: dropped 0"
    assert lines[4].endswith("(further warnings of this kind are counted)")
    assert warnings.unprinted("dropped messages") == 3
    warnings.flush()
    assert lines[-1] == "warning: 3 more dropped messages not shown (8 in all)"
    assert len(lines) == 7


def test_a_remote_worker_prints_the_coordinators_words_without_controls(monkeypatch, capsys):
    """workers/ cannot import printable; its exit line drops what a terminal acts on."""
    import workers.link as link

    def no_exit(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(link.os, "_exit", no_exit)
    try:
        link._exit("refused: \x1b]0;owned\x07key\x1b[2J\nforged line", 2)
    except SystemExit as stop:
        assert stop.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert not any(c in err for c in "\x1b\x07\r")
    assert "key" in err and "forged line" in err
