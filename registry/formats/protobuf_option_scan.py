"""The custom option assignments of ``.proto`` text, found by a scan of its tokens: for each one, the
element it sets (file, message, field, oneof, enum, enum value, service, method, extension range), its name
and value as text, and the characters that take it out of the text.

This is not a parser of the language: protoc is (``protobuf_compile``). The scan runs only on text that
protoc has parsed already (it refused options, which it interprets after parsing), so the text is valid
``.proto`` and the scan follows the statements' shapes loosely; text it cannot follow raises ``ScanError``
and the caller keeps protoc's verdict. What it must get right:
- where each assignment starts (the ``(`` of its name), as protoc reports it: line and column from 0,
  columns in UTF-8 bytes with a tab moving to the next multiple of 8, as protoc's tokenizer counts;
- the element each assignment sets, by the full names a descriptor gives (``.pkg.Msg.field``, an enum
  value under its enum, a group's field by its lower-cased name);
- removal that keeps the rest of the text where it was: removed characters become spaces of the same
  byte length (line breaks and tabs stay), so protoc's later errors point into the text as registered; in
  a ``[...]`` list the commas that remain still separate the entries that remain, and a list left empty
  goes whole.

Values are kept as normalized text, since no definition says their type: numbers in decimal (a float as
Python's shortest repr), adjacent string literals joined and re-quoted, an aggregate ``{ ... }`` token by
token with single spaces. Equal values written differently then print alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from google.protobuf import text_encoding

from registry.formats.protobuf_options import quote_string


class ScanError(ValueError):
    """The text has a shape the scan does not follow."""


@dataclass(frozen=True, slots=True)
class UndefinedOption:
    """A custom option assignment kept beside a descriptor. ``kind`` is the element's kind (``file``,
    ``message``, ``field``, ``oneof``, ``enum``, ``enum_value``, ``service``, ``method``,
    ``extension_range``); ``scope`` its full name with a leading dot (``""`` for the file; an extension
    range is ``<message>:<start>``); ``name`` as written (``(my_option)``, ``(a.b).c``); ``value``
    normalized."""

    kind: str
    scope: str
    name: str
    value: str

    @property
    def sort_key(self) -> str:
        """The name without parentheses or a leading dot: the key a defined option's full name is."""
        return self.name.replace("(", "").replace(")", "").lstrip(".")

    @property
    def assignment(self) -> str:
        return f"{self.name} = {self.value}"


@dataclass(frozen=True, slots=True)
class Site:
    """One custom option assignment in the text: ``options`` what it sets (one per element: an
    ``extensions`` statement's options set each of its ranges); ``at`` (line, column) of its ``(``, as
    protoc reports it; ``span`` its characters (an option statement's from ``option`` to ``;``); ``bracket``
    the index of its ``[...]`` list, whose commas ``Scan.removal`` takes out with it, or -1."""

    options: tuple[UndefinedOption, ...]
    at: tuple[int, int]
    span: tuple[int, int]
    bracket: int


@dataclass(slots=True)
class _Bracket:
    open: int
    close: int
    entries: list[tuple[int, int]]
    commas: list[int]
    sites: list[int]  # per entry: the index of its Site, -1 for a standard option


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # ident, int, float, string, symbol
    text: str
    start: int
    end: int
    line: int
    column: int


_TOKEN = re.compile(
    r"""(?P<space>\s+)
    |(?P<comment>//[^\n]*|/\*.*?\*/)
    |(?P<float>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?|\d+[eE][+-]?\d+[fF]?)
    |(?P<int>0[xX][0-9A-Fa-f]+|\d+)
    |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    |(?P<symbol>[^\s])""",
    re.VERBOSE | re.DOTALL,
)


def tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    line, column, pos = 0, 0, 0
    while pos < len(text):
        found = _TOKEN.match(text, pos)
        if found is None:  # an unterminated comment or string: protoc would have refused it
            raise ScanError(f"no token at line {line + 1}")
        kind = found.lastgroup or "symbol"
        if kind not in ("space", "comment"):
            tokens.append(_Token(kind, found.group(), pos, found.end(), line, column))
        for char in found.group():
            if char == "\n":
                line, column = line + 1, 0
            elif char == "\t":
                column += 8 - column % 8
            else:
                column += len(char.encode("utf-8"))
        pos = found.end()
    return tokens


class Scan:
    """The custom option assignments of one ``.proto`` text (``sites``), and the text without some."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._tokens = tokenize(text)
        self._i = 0
        self.sites: list[Site] = []
        self._brackets: list[_Bracket] = []
        self._file()

    def removal(self, removed: Iterable[int]) -> str:
        """The text with the sites at these indexes taken out (positions kept, see the module docstring)."""
        gone = set(removed)
        spans = [self.sites[i].span for i in gone if self.sites[i].bracket < 0]
        for bracket in self._brackets:
            kept = [k for k, site in enumerate(bracket.sites) if site not in gone]
            if len(kept) == len(bracket.entries):
                continue
            if not kept:
                spans.append((bracket.open, bracket.close + 1))
                continue
            spans.extend(bracket.entries[k] for k, site in enumerate(bracket.sites) if site in gone)
            # The comma after each kept entry but the last kept stays; every other comma goes.
            staying = {bracket.commas[k] for k in kept[:-1]}
            spans.extend((c, c + 1) for c in bracket.commas if c not in staying)
        chars = list(self._text)
        for start, end in spans:
            for pos in range(start, end):
                if chars[pos] not in "\n\t":
                    chars[pos] = " " * len(chars[pos].encode("utf-8"))
        return "".join(chars)

    # --- the statements -----------------------------------------------------------------------------------
    def _peek(self, offset: int = 0) -> _Token | None:
        at = self._i + offset
        return self._tokens[at] if at < len(self._tokens) else None

    def _next(self) -> _Token:
        token = self._peek()
        if token is None:
            raise ScanError("the text ends inside a statement")
        self._i += 1
        return token

    def _expect(self, text: str) -> _Token:
        token = self._next()
        if token.text != text:
            raise ScanError(f"expected {text!r} at line {token.line + 1}, found {token.text!r}")
        return token

    def _opens_block(self) -> bool:
        """A name and then ``{``: the keyword just read declares a block (else it is a field's type)."""
        after = self._peek(1)
        return after is not None and after.text == "{"

    def _skip_statement(self) -> None:
        while self._next().text != ";":
            pass

    def _file(self) -> None:
        scope = ""
        while self._peek() is not None:
            word = self._next()
            if word.text == "package":
                parts = []
                while (token := self._next()).text != ";":
                    parts.append(token.text)
                scope = "." + "".join(parts)
            elif word.text == "option":
                self._statement_option(word, ("file", ""))
            elif word.text in ("message", "enum", "service"):
                name = self._next().text
                self._expect("{")
                self._block(word.text, f"{scope}.{name}")
            elif word.text == "extend":
                self._extend(scope)
            elif word.text in ("syntax", "edition", "import"):
                self._skip_statement()
            elif word.text != ";":
                raise ScanError(f"unexpected {word.text!r} at line {word.line + 1}")

    def _block(self, kind: str, full: str) -> None:
        """The body of a ``message``, ``enum`` or ``service`` after its ``{``, up to its ``}``."""
        while (word := self._next()).text != "}":
            if word.text == ";":
                continue
            if word.text == "option":
                self._statement_option(word, (kind, full))
            elif word.text == "reserved":
                self._skip_statement()
            elif kind == "enum":
                self._enum_value(word, full)
            elif kind == "service":
                self._method(word, full)
            elif word.text in ("message", "enum") and self._opens_block():
                name = self._next().text
                self._expect("{")
                self._block(word.text, f"{full}.{name}")
            elif word.text == "extend":
                self._extend(full)
            elif word.text == "oneof" and self._opens_block():
                self._oneof(full, self._next().text)
            elif word.text == "extensions":
                self._extensions(full)
            else:
                self._field(word, full)

    def _oneof(self, message: str, name: str) -> None:
        self._expect("{")
        while (word := self._next()).text != "}":
            if word.text == "option":
                self._statement_option(word, ("oneof", f"{message}.{name}"))
            elif word.text != ";":
                self._field(word, message)

    def _extend(self, scope: str) -> None:
        """An ``extend`` block: its fields are declared in the enclosing scope."""
        while self._next().text != "{":
            pass
        while (word := self._next()).text != "}":
            if word.text != ";":
                self._field(word, scope)

    def _field(self, first: _Token, scope: str) -> None:
        """``[label] type name = number [options];``, a ``map<K, V>`` field, or a group with its body."""
        head = [first]
        while (token := self._next()).text != "=":
            head.append(token)
        name = head[-1].text
        group = len(head) >= 2 and head[-2].text == "group"
        self._next()  # the number
        after = self._next()
        field = f"{scope}.{name.lower() if group else name}"
        if after.text == "[":
            self._bracket(after, (("field", field),))
            after = self._next()
        if group and after.text == "{":
            self._block("message", f"{scope}.{name}")
        elif after.text != ";":
            raise ScanError(f"unexpected {after.text!r} after field {name} at line {after.line + 1}")

    def _enum_value(self, name: _Token, enum: str) -> None:
        self._expect("=")
        after = self._next()
        if after.text == "-":
            after = self._next()
        after = self._next()
        if after.text == "[":
            self._bracket(after, (("enum_value", f"{enum}.{name.text}"),))
            after = self._next()
        if after.text != ";":
            raise ScanError(f"unexpected {after.text!r} after enum value {name.text}")

    def _extensions(self, message: str) -> None:
        """``extensions 100 to 199, 300 [options];``: the options set each range, keyed by its start."""
        starts: list[int] = []
        expect_start = True
        while (token := self._next()).text not in (";", "["):
            if expect_start and token.kind == "int":
                starts.append(int_value(token.text))
            expect_start = token.text == ","
        if token.text == "[":
            self._bracket(token, tuple(("extension_range", f"{message}:{start}") for start in starts))
            self._expect(";")

    def _method(self, word: _Token, service: str) -> None:
        if word.text != "rpc":
            raise ScanError(f"unexpected {word.text!r} in service {service}")
        name = self._next().text
        while (token := self._next()).text not in (";", "{"):
            pass
        if token.text == "{":
            while (inner := self._next()).text != "}":
                if inner.text == "option":
                    self._statement_option(inner, ("method", f"{service}.{name}"))
                elif inner.text != ";":
                    raise ScanError(f"unexpected {inner.text!r} in rpc {name}")

    # --- the options ---------------------------------------------------------------------------------------
    def _statement_option(self, keyword: _Token, where: tuple[str, str]) -> None:
        """``option name = value;``, recorded if its name is a custom option's."""
        opening = self._peek()
        name = self._option_name()
        value = self._value((";",))
        end = self._expect(";").end
        if opening is not None and opening.text == "(":
            self._record((where,), name, value, opening, (keyword.start, end), -1)

    def _bracket(self, opening: _Token, where: tuple[tuple[str, str], ...]) -> None:
        """``[name = value, ...]`` after its ``[``, up to its ``]``."""
        bracket = _Bracket(opening.start, -1, [], [], [])
        index = len(self._brackets)
        self._brackets.append(bracket)
        while True:
            first = self._peek()
            if first is None:
                raise ScanError("the text ends inside [...]")
            name = self._option_name()
            value = self._value((",", "]"))
            last = self._tokens[self._i - 1]
            bracket.entries.append((first.start, last.end))
            if first.text == "(":
                bracket.sites.append(len(self.sites))
                self._record(where, name, value, first, (first.start, last.end), index)
            else:
                bracket.sites.append(-1)
            end = self._next()
            if end.text == "]":
                bracket.close = end.start
                return
            if end.text != ",":
                raise ScanError(f"unexpected {end.text!r} in [...] at line {end.line + 1}")
            bracket.commas.append(end.start)

    def _record(
        self,
        where: Sequence[tuple[str, str]],
        name: str,
        value: str,
        opening: _Token,
        span: tuple[int, int],
        bracket: int,
    ) -> None:
        options = tuple(UndefinedOption(kind, scope, name, value) for kind, scope in where)
        self.sites.append(Site(options, (opening.line, opening.column), span, bracket))

    def _option_name(self) -> str:
        """The option's name up to its ``=``, without spaces: ``deprecated``, ``(my.opt).sub``."""
        parts = []
        while (token := self._next()).text != "=":
            parts.append(token.text)
        if not parts:
            raise ScanError("an option without a name")
        return "".join(parts)

    def _value(self, ends: tuple[str, ...]) -> str:
        """An option's value up to (not taking) one of ``ends``, normalized (the module docstring)."""
        tokens: list[_Token] = []
        depth = 0
        while True:
            token = self._peek()
            if token is None:
                raise ScanError("the text ends inside an option's value")
            if depth == 0 and token.text in ends:
                break
            if token.text in "{[<":
                depth += 1
            elif token.text in "}]>":
                depth -= 1
            tokens.append(self._next())
        if not tokens:
            raise ScanError("an option without a value")
        return render(tokens)


def int_value(text: str) -> int:
    """An integer literal as protoc reads it: ``0x`` hex, a leading ``0`` octal, else decimal."""
    try:
        if text[:2] in ("0x", "0X"):
            return int(text[2:], 16)
        if len(text) > 1 and text.startswith("0"):
            return int(text[1:], 8)
        return int(text)
    except ValueError:  # "09": not a literal protoc reads
        raise ScanError(f"not an integer literal: {text!r}") from None


def _string(literals: list[str]) -> str:
    try:
        raw = b"".join(text_encoding.CUnescape(literal[1:-1]) for literal in literals)
    except ValueError:  # a truncated \x or \u escape: not a literal protoc reads
        raise ScanError(f"not a string literal: {literals[0]}") from None
    try:
        return quote_string(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return '"' + text_encoding.CEscape(raw, as_utf8=False) + '"'


def render(tokens: Sequence[_Token]) -> str:
    """Tokens of a value as normalized text: single spaces, none before ``: , ; ] >`` or after
    ``[ <``, a sign joined to its number, numbers in decimal, adjacent strings joined and re-quoted."""
    words: list[str] = []
    glue = True  # no space before the next word
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.kind == "string":
            literals = [token.text]
            while i + 1 < len(tokens) and tokens[i + 1].kind == "string":
                i += 1
                literals.append(tokens[i].text)
            word = _string(literals)
        elif token.kind == "int":
            word = str(int_value(token.text))
        elif token.kind == "float":
            word = repr(float(token.text.rstrip("fF")))
        else:
            word = token.text
        if words and not glue and word not in (":", ",", ";", "]", ">"):
            words.append(" ")
        words.append(word)
        glue = word in ("[", "<", "-")
        i += 1
    return "".join(words)
