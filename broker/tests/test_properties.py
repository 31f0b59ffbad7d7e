"""moldau.properties: java.util.Properties' load and store rules, one rule per test."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.properties import PropertiesError, dumps, load, parse

GOLDEN_NOW = datetime(2024, 1, 2, 10, 0, 0, tzinfo=UTC)

# -- natural and logical lines ---------------------------------------------------------------


@pytest.mark.parametrize("eol", ["\n", "\r", "\r\n"])
def test_natural_lines_end_at_lf_cr_and_crlf(eol: str) -> None:
    assert parse(eol.join(["a=1", "b=2", "c=3"])) == {"a": "1", "b": "2", "c": "3"}


def test_no_other_line_breaks() -> None:
    # \f is whitespace, and \v \x1c \x85 \u2028 are ordinary chars (str.splitlines breaks there)
    text = "a=1\fx\vy\x1cz\x85w\u2028v\nb=2"
    assert parse(text) == {"a": "1\fx\vy\x1cz\x85w\u2028v", "b": "2"}


@pytest.mark.parametrize("eol", ["\n", "\r", "\r\n"])
def test_odd_trailing_backslashes_continue_the_line(eol: str) -> None:
    text = eol.join(["list = one,\\", "   \t\ftwo,\\", "three", "even=x\\\\", "next=y", ""])
    assert parse(text) == {"list": "one,two,three", "even": "x\\", "next": "y"}


@pytest.mark.parametrize(
    "text, props",
    [
        pytest.param("a=x\\\\\\\n  y\n", {"a": "x\\y"}, id="three-backslashes-keep-one"),
        pytest.param("a = one \\\n    two  \n", {"a": "one two  "}, id="inner-whitespace-kept"),
        pytest.param("a=1\\", {"a": "1"}, id="last-line-backslash-dropped"),
        pytest.param("a=1\\\n", {"a": "1"}, id="last-line-backslash-before-eol-dropped"),
        pytest.param("a=1\\\n   \nb=2\n", {"a": "1", "b": "2"}, id="blank-line-ends-it"),
        pytest.param("# c\n! bang\n   # indented\n\t! tab\n\n   \n\f\na=1\n", {"a": "1"},
                     id="comments-and-blank-lines-skipped"),
        pytest.param("# c \\\na=1\n! c \\\nb=2\n", {"a": "1", "b": "2"},
                     id="comment-never-continued"),
        pytest.param("a=1,\\\n  #2,\\\n  !3\n", {"a": "1,#2,!3"},
                     id="continuation-may-start-with-hash"),
        # LineReader looks for a comment while the logical line is still empty
        pytest.param("\\\n#x=1\nb=2\n", {"b": "2"}, id="hash-after-empty-continuation"),
        pytest.param("a=1 # no comment\n", {"a": "1 # no comment"}, id="hash-inside-a-line"),
        pytest.param("a=1\nb=2\na=3\n", {"a": "3", "b": "2"}, id="repeated-key-last-wins"),
        # checked against OpenJDK 17: a lone backslash line ending the file is an empty key
        pytest.param("a=1\n\\", {"a": "1", "": ""}, id="lone-backslash-at-end"),
        pytest.param("a=1\n  \\\n", {"a": "1", "": ""}, id="lone-backslash-lf-at-end"),
        pytest.param("a=1\n\\\r", {"a": "1", "": ""}, id="lone-backslash-cr-at-end"),
        # ... but not before \r\n: LineReader reads its \n before it meets the end
        pytest.param("a=1\n\\\r\n", {"a": "1"}, id="lone-backslash-crlf-at-end"),
        pytest.param("a=1\n\\\n\n", {"a": "1"}, id="lone-backslash-then-blank-line"),
        pytest.param("a=1\n\\\n  ", {"a": "1"}, id="lone-backslash-then-whitespace"),
        pytest.param("a=1\\\n\\\n", {"a": "1"}, id="backslash-line-continuing-a-line"),
    ],
)
def test_logical_lines(text: str, props: dict[str, str]) -> None:
    assert parse(text) == props


# -- key and value ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, key, value",
    [
        ("k=v", "k", "v"),
        ("k:v", "k", "v"),
        ("k v", "k", "v"),
        ("k\tv", "k", "v"),
        ("k\fv", "k", "v"),
        ("k = v", "k", "v"),
        ("k \t: \fv", "k", "v"),
        ("k= =v", "k", "=v"),  # one separator only
        ("k::v", "k", ":v"),
        ("k  =  = v", "k", "= v"),
        ("k=v  ", "k", "v  "),  # the value keeps its trailing whitespace
        ("k=a b", "k", "a b"),
        ("k", "k", ""),
        ("k=", "k", ""),
        ("k   ", "k", ""),
        ("=v", "", "v"),
        (":", "", ""),
        ("k\\=ey=v", "k=ey", "v"),
        ("k\\:ey:v", "k:ey", "v"),
        ("k\\ ey v", "k ey", "v"),
        ("k\\\tey v", "k\tey", "v"),
        ("k\\\\=v", "k\\", "v"),  # an escaped backslash does not escape the '='
        ("k=a=b:c", "k", "a=b:c"),
    ],
)
def test_key_and_value(line: str, key: str, value: str) -> None:
    assert parse(line + "\n") == {key: value}


# -- escapes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "escaped, char",
    [("\\t", "\t"), ("\\n", "\n"), ("\\r", "\r"), ("\\f", "\f"), ("\\\\", "\\"),
     ("\\u0041", "A"), ("\\u00e9", "é"), ("\\u00E9", "é"), ("\\uFFFF", "\uffff"),
     ("\\uD83D\\uDE00", "😀"),  # a surrogate pair is one character
     ("\\q", "q"), ("\\#", "#"), ("\\!", "!"), ("\\ ", " "), ("\\b", "b"), ("\\é", "é")],
)
def test_escape(escaped: str, char: str) -> None:
    assert parse(f"k{escaped}k=v{escaped}v\n") == {f"k{char}k": f"v{char}v"}


def test_an_escaped_backslash_before_u_is_no_unicode_escape() -> None:
    assert parse("k=\\\\u0041\n") == {"k": "\\u0041"}


@pytest.mark.parametrize(
    "text, escape, key, value",
    [
        ("a=\\u12G4\n", "\\u12G4", "a", "\\u12G4"),
        ("a=x\\u12\n", "\\u12", "a", "x\\u12"),  # fewer than four chars left
        ("a=\\u\n", "\\u", "a", "\\u"),
        ("\\u00e9\\uXYZW=v\n", "\\uXYZW", "\\u00e9\\uXYZW", "v"),  # in the key: as written
        ("# c\n\nx=1\nlong=\\\n  \\u00zz\n", "\\u00zz", "long", "\\u00zz"),
    ],
)
def test_malformed_unicode_escape(text: str, escape: str, key: str, value: str) -> None:
    with pytest.raises(PropertiesError) as info:
        parse(text)
    assert isinstance(info.value, ValueError)
    assert (info.value.escape, info.value.key, info.value.value) == (escape, key, value)
    assert str(info.value).startswith("Malformed \\uxxxx encoding")


def test_malformed_escape_names_the_first_line_of_the_logical_line() -> None:
    with pytest.raises(PropertiesError, match=r"in line 4: \\u00zz$"):
        parse("# c\n\nx=1\nlong=\\\n  \\u00zz\n")


# -- files -----------------------------------------------------------------------------------


def test_load_reads_iso_8859_1(tmp_path) -> None:
    path = tmp_path / "x.properties"
    path.write_bytes(b"latin=caf\xe9\nutf8=caf\xc3\xa9\nnel=a\x85b\r\nesc=\\u20AC\n")
    # every byte is one char: UTF-8 text arrives as mojibake, \x85 is no line break
    assert load(path) == {"latin": "café", "utf8": "cafÃ©", "nel": "a\x85b", "esc": "€"}
    assert load(str(path)) == load(path)


def test_load_of_a_missing_file_is_an_oserror(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "missing.properties")


# -- writing ---------------------------------------------------------------------------------


def test_known_meta_properties_bytes() -> None:
    props = {"version": "0", "broker.id": "1", "cluster.id": "Nk018hRAQFytWskYqtQduw"}
    assert dumps(props, comments="", now=GOLDEN_NOW).encode("ascii") == (
        b"#\n"
        b"#Tue Jan 02 10:00:00 UTC 2024\n"
        b"broker.id=1\n"
        b"cluster.id=Nk018hRAQFytWskYqtQduw\n"
        b"version=0\n"
    )


def test_date_line_is_java_date_to_string() -> None:
    cest = timezone(timedelta(hours=2), "CEST")
    now = datetime(2022, 6, 5, 8, 3, 1, tzinfo=cest)
    assert dumps({}, now=now) == "#Sun Jun 05 08:03:01 CEST 2022\n"
    assert dumps({}, now=datetime(2022, 6, 5, 8, 3, 1)) == "#Sun Jun 05 08:03:01 UTC 2022\n"


def test_comments() -> None:
    def header(comments: str | None) -> str:
        return dumps({}, comments=comments, now=GOLDEN_NOW).removesuffix(
            "#Tue Jan 02 10:00:00 UTC 2024\n")

    assert header(None) == ""
    assert header("") == "#\n"
    assert header("one") == "#one\n"
    assert header("one\ntwo\r\nthree\rfour") == "#one\n#two\n#three\n#four\n"
    assert header("a\n#b\n!c\n") == "#a\n#b\n!c\n#\n"  # lines already comments stay
    assert header("café € 😀") == "#café \\u20AC \\uD83D\\uDE00\n"  # above U+00FF escaped


@pytest.mark.parametrize(
    "key, value, line",
    [
        ("k", " lead", "k=\\ lead"),  # a leading space of a value is escaped ...
        ("k", "a b ", "k=a b "),  # ... no other
        ("a key", "v", "a\\ key=v"),  # every space of a key
        ("k", "\t\n\r\f", "k=\\t\\n\\r\\f"),
        ("=:#!\\", "=:#!\\", "\\=\\:\\#\\!\\\\=\\=\\:\\#\\!\\\\"),
        ("k", "\x00\x1f\x7f", "k=\\u0000\\u001F\\u007F"),
        ("é", "ÿĀ€", "\\u00E9=\\u00FF\\u0100\\u20AC"),  # uppercase hex
        ("k", "😀", "k=\\uD83D\\uDE00"),  # UTF-16 units, as Java's chars
        ("k", "~ok", "k=~ok"),
        ("", "", "="),
    ],
)
def test_escaping(key: str, value: str, line: str) -> None:
    assert dumps({key: value}, now=GOLDEN_NOW).splitlines()[1:] == [line]


def test_keys_in_java_string_order() -> None:
    # UTF-16 order puts U+1F600 (\uD83D...) before U+FF01; code point order would not
    props = {"b": "2", "\uff01": "3", "a": "1", "😀": "4", "B": "0"}
    lines = dumps(props, now=GOLDEN_NOW).splitlines()[1:]
    assert [line.split("=")[1] for line in lines] == ["0", "1", "2", "4", "3"]


# Text that exercises every rule: separators, escapes, comment marks, line breaks, non-ASCII
# (Latin-1, BMP, beyond the BMP) and ordinary characters.
special = st.sampled_from(list(" \t\n\r\f\v=:#!\\u\x00\x85é€\uff01😀"))
texts = st.text(st.one_of(special, st.characters()), max_size=20)


@given(st.dictionaries(texts, texts, max_size=8), st.one_of(st.none(), texts))
def test_round_trip(props: dict[str, str], comments: str | None) -> None:
    text = dumps(props, comments=comments, now=GOLDEN_NOW)
    assert parse(text) == props
    # as a file: store(OutputStream) writes ISO-8859-1, load(InputStream) reads it back
    assert parse(text.encode("latin-1").decode("latin-1")) == props
    assert dumps(props, now=GOLDEN_NOW).isascii()  # keys and values are always ASCII


@given(texts)
def test_comments_never_become_properties(comments: str) -> None:
    assert parse(dumps({}, comments=comments, now=GOLDEN_NOW)) == {}
