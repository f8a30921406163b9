"""The output gate and the last-resort handler (issue #61 item 2): any exception at an entry point is one line,
escaped, cut by bytes, credentials hidden; exit 2 for a store or server that failed, 1 for a fault; the traceback
only behind --debug. Normal output is escaped like errors. API arguments are converted, never trusted."""

from __future__ import annotations

import unicodedata

import pytest

from nmt_core import cli as nmt_cli
from nmt_core.gates.faults import BAD_INPUT, FAULT, exit_code
from nmt_core.gates.gate import LINE_BYTES, clip, hide_secrets, one_line, printable
from sweeper import api
from sweeper import cli as sweeper_cli
from tests.hostile import ESCAPES, SECRET, SECRET_TEXT

# every character class the gate must not let through: C0, DEL, C1, line and paragraph separators, bidi and other
# format characters (Cf), a lone surrogate
HOSTILE_CHARACTERS = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029, 0xDCFF)] + [
    chr(c) for c in range(0x2000, 0x2070) if unicodedata.category(chr(c)) == "Cf"
]


def shown_safely(text: str) -> bool:
    return all(c.isprintable() for c in text)


@pytest.mark.parametrize("character", HOSTILE_CHARACTERS, ids=lambda c: f"U+{ord(c):04X}")
def test_one_line_and_printable_escape_every_control_and_format_character(character):
    assert shown_safely(one_line(f"a{character}b"))
    kept = "\t\n"  # normal output keeps its tabs and line breaks
    assert all(shown_safely(line.replace("\t", " ")) for line in printable(f"x{character}y\nz").split("\n"))
    assert character in kept or character not in printable(f"x{character}y")


def test_printable_keeps_line_breaks_and_tabs_of_normal_output():
    assert printable("a\tb\nc\x1b[2Jd\n") == "a\tb\nc\\x1b[2Jd\n"


def test_one_line_is_cut_by_bytes_after_escaping():
    for text in ("\U0001f600" * 1000, "\x1b" * 1000, "k" * 10_000, ESCAPES * 100):
        line = one_line(text)
        assert len(line.encode()) <= LINE_BYTES and shown_safely(line), len(line.encode())
    # escaped before it is cut: 1,000 ESC characters become 4,000 shown characters, cut to the bound
    assert one_line("\x1b" * 1000).startswith("\\x1b\\x1b")


def test_clip_bounds_bytes_not_characters():
    shown = clip("\U0001f600" * 100, 100)
    assert len(shown.split("...")[0].encode()) <= 100 and "(100 characters)" in shown


def test_free_text_loses_every_credential_a_server_echoes(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "hunter2-Zq9")
    text = hide_secrets(f"{SECRET_TEXT} login failed for hunter2-Zq9; {{'api_key': 'AbCdEf123'}}")
    assert SECRET not in text and "hunter2-Zq9" not in text and "AbCdEf123" not in text
    # a setting named like a secret is not one: its message is shown
    assert hide_secrets("train.token_budget: must be in [0, 10]") == "train.token_budget: must be in [0, 10]"


def test_a_store_library_error_is_bad_input_and_anything_else_a_fault():
    import requests

    assert exit_code(requests.ConnectionError("x")) == BAD_INPUT
    assert exit_code(OSError("x")) == BAD_INPUT
    assert exit_code(KeyError("x")) == FAULT
    try:
        requests.models.Response().json()  # raised inside requests: a server's answer it cannot read
    except Exception as err:  # noqa: BLE001
        assert exit_code(err) == BAD_INPUT


def _raising(error: BaseException):
    def command(args):
        raise error

    return command


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (KeyError(f"{ESCAPES} {SECRET_TEXT}"), 1),
        (OverflowError("x" * 100_000), 1),
        (OSError(28, f"No space left {ESCAPES}"), 2),
        (ConnectionError(SECRET_TEXT), 2),
    ],
)
@pytest.mark.parametrize("which", ["sweeper", "nmt"])
def test_any_exception_at_a_command_line_is_one_safe_line(which, error, code, monkeypatch, capsys):
    main, command = (sweeper_cli.main, "cmd_schema") if which == "sweeper" else (nmt_cli.main, "cmd_data")
    monkeypatch.setattr(sweeper_cli if which == "sweeper" else nmt_cli, command, _raising(error))
    argv = ["schema"] if which == "sweeper" else ["data", "info", "synthetic"]
    assert main(argv) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err.encode()) <= 600 and shown_safely(err.rstrip("\n")), err
    assert SECRET not in err and err.startswith(f"{which}: error: ")
    assert ("--debug" in err) == (code == 1)


def test_debug_shows_the_traceback_escaped_and_without_credentials(monkeypatch, capsys):
    monkeypatch.setattr(sweeper_cli, "cmd_schema", _raising(KeyError(f"{ESCAPES} {SECRET_TEXT}")))
    assert sweeper_cli.main(["--debug", "schema"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "_raising" in err or "command" in err
    assert SECRET not in err and all(shown_safely(line) for line in err.replace("\t", " ").split("\n"))


class Hostile:
    """An argument whose every method raises, with a terminal escape and a secret in its message."""

    def _raise(self, *args):
        raise RuntimeError(f"{ESCAPES} {SECRET}")

    __fspath__ = __repr__ = __str__ = __eq__ = __iter__ = __len__ = __hash__ = _raise


class HostileStr(str):
    def __str__(self):
        raise RuntimeError(SECRET)

    def isprintable(self):
        raise RuntimeError(SECRET)


@pytest.mark.parametrize(
    "call",
    [
        lambda: api.validate(Hostile()),
        lambda: api.summarize(Hostile()),
        lambda: api.summarize("fuzz", format=Hostile()),
        lambda: api.summarize("fuzz", added=Hostile()),
        lambda: api.sweep_status(HostileStr("fuzz\x1b"), storage="st"),
        lambda: api.list_sweeps(Hostile()),
        lambda: api.stop_sweep("fuzz", wait_s=Hostile()),
        lambda: api.translate(Hostile(), "models:/m/1"),
    ],
)
def test_api_arguments_that_misbehave_are_a_sweeper_error(call, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(api.SweeperError) as raised:
        call()
    message = str(raised.value)
    assert raised.value.exit_code == 2 and shown_safely(message) and SECRET not in message, message
    assert raised.value.__cause__ is None or isinstance(raised.value.__cause__, Exception)


def test_an_api_fault_is_a_sweeper_error_without_its_chain(monkeypatch):
    from sweeper.space import schema

    monkeypatch.setattr(schema, "write", _raising(KeyError(f"{ESCAPES} {SECRET_TEXT}")))
    with pytest.raises(api.SweeperError) as raised:
        api.schema("/nonexistent-gates-out")
    error = raised.value
    assert error.exit_code == 1 and error.__cause__ is None and error.__suppress_context__
    assert isinstance(error.fault, KeyError) and SECRET not in str(error) and shown_safely(str(error))
