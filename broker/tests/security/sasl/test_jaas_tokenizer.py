"""The corners of java.io.StreamTokenizer that JAAS parsing inherits."""

from __future__ import annotations

from moldau.security.sasl.jaas_tokenizer import (
    JAAS_FILE_SYNTAX,
    KAFKA_JAAS_CONFIG_SYNTAX,
    StreamTokenizer,
    Syntax,
    TokenKind,
)


def tokens(text: str, syntax: Syntax) -> list[tuple[TokenKind, str]]:
    tokenizer = StreamTokenizer(text, syntax)
    out: list[tuple[TokenKind, str]] = []
    while (token := tokenizer.next_token()).kind is not TokenKind.EOF:
        out.append((token.kind, token.text))
    return out


W, Q, N, OR, L = (TokenKind.WORD, TokenKind.QUOTED, TokenKind.NUMBER, TokenKind.ORDINARY,
                 TokenKind.EOL)


def test_lone_slash_before_a_line_break_swallows_the_next_line() -> None:
    # Java reads the character after '/' before skipping to the end of the line.
    assert tokens("a /\nb\nc", KAFKA_JAAS_CONFIG_SYNTAX) == [(W, "a"), (W, "c")]
    assert tokens("a //\nb", KAFKA_JAAS_CONFIG_SYNTAX) == [(W, "a"), (W, "b")]
    assert tokens("a /x\nb", KAFKA_JAAS_CONFIG_SYNTAX) == [(W, "a"), (W, "b")]


def test_block_comment_corners() -> None:
    assert tokens("a /**/ b", KAFKA_JAAS_CONFIG_SYNTAX) == [(W, "a"), (W, "b")]
    assert tokens("a /*/ b */ c", KAFKA_JAAS_CONFIG_SYNTAX) == [(W, "a"), (W, "c")]
    # the character after a line break inside a comment is never taken as its end
    assert tokens("a /* *\n/ b */ c", KAFKA_JAAS_CONFIG_SYNTAX) == [(W, "a"), (W, "c")]
    assert tokens("a /* never closed", KAFKA_JAAS_CONFIG_SYNTAX) == [(W, "a")]


def test_file_syntax_numbers_words_and_lines() -> None:
    assert tokens("x=12.5.3 -7 - a-b.c_d$*", JAAS_FILE_SYNTAX) == [
        (W, "x"), (OR, "="), (N, "12.5"), (N, ".3"), (N, "-7"), (OR, "-"), (W, "a-b.c_d$*")]
    assert tokens("a\r\nb\rc\n", JAAS_FILE_SYNTAX) == [
        (W, "a"), (L, ""), (W, "b"), (L, ""), (W, "c"), (L, "")]
    assert tokens("a:b@c", JAAS_FILE_SYNTAX) == [(W, "a"), (OR, ":"), (W, "b"), (OR, "@"),
                                                 (W, "c")]


def test_kafka_syntax_words() -> None:
    assert tokens("a:b@c{d}1.2 \x85x\u0100", KAFKA_JAAS_CONFIG_SYNTAX) == [
        (W, "a:b@c{d}1.2"), (OR, "\x85"), (W, "x\u0100")]


def test_quoted_string_corners() -> None:
    assert tokens('"a\\\nb" c', KAFKA_JAAS_CONFIG_SYNTAX) == [(Q, "a\nb"), (W, "c")]
    assert tokens('"a\\', KAFKA_JAAS_CONFIG_SYNTAX) == [(Q, "a\uffff")]
    assert tokens("'a\"b' \"c'd\"", KAFKA_JAAS_CONFIG_SYNTAX) == [(Q, 'a"b'), (Q, "c'd")]


def test_line_numbers() -> None:
    tokenizer = StreamTokenizer('a\n/* x\ny */ "q\\\nr"\nb', KAFKA_JAAS_CONFIG_SYNTAX)
    assert [tokenizer.next_token().line for _ in range(3)] == [1, 3, 5]
