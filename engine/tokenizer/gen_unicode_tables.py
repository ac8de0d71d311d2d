#!/usr/bin/env python3
"""Generates engine/tokenizer/unicode_data.cpp from the Unicode Character Database.

The pre-tokenizers need, for every code point, its general category class (letter, number,
mark, punctuation, symbol, separator, control, unassigned) and whether it has the White_Space
property; WordPiece normalisation needs each code point's simple lowercase mapping and the first
code point of its full canonical decomposition (NFD), which is how the reference strips accents.
All of it comes straight from the UCD files shipped by Debian's `unicode-data` package
(/usr/share/unicode/UnicodeData.txt and PropList.txt), so the tables follow a real Unicode
version rather than ASCII shortcuts. Hangul syllables decompose algorithmically and are left
to the code (unicode.cpp). The output is committed; rerun this script only to move to
a newer Unicode version:

    python3 engine/tokenizer/gen_unicode_tables.py [UCD_DIR] > engine/tokenizer/unicode_data.cpp
"""

import os
import re
import sys

MAX_CODE_POINT = 0x10FFFF

# Flag bits; must match engine/tokenizer/unicode.h.
UNDEFINED = 0x001
NUMBER = 0x002
LETTER = 0x004
SEPARATOR = 0x008
MARK = 0x010
PUNCTUATION = 0x020
SYMBOL = 0x040
CONTROL = 0x080
WHITESPACE = 0x100

# The first letter of a general category names its class; C* splits into unassigned (Cn,
# never listed in UnicodeData.txt) and the rest (Cc, Cf, Co, Cs).
CLASS_OF_MAJOR = {
    "L": LETTER,
    "N": NUMBER,
    "M": MARK,
    "P": PUNCTUATION,
    "S": SYMBOL,
    "Z": SEPARATOR,
    "C": CONTROL,
}


def read_categories(path):
    flags = [UNDEFINED] * (MAX_CODE_POINT + 1)
    range_start = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(";")
            if len(fields) < 3:
                continue
            cp = int(fields[0], 16)
            name, category = fields[1], fields[2]
            value = CLASS_OF_MAJOR[category[0]]
            if name.endswith(", First>"):
                range_start = cp
                continue
            if name.endswith(", Last>"):
                for c in range(range_start, cp + 1):
                    flags[c] = value
                range_start = None
                continue
            flags[cp] = value
    return flags


def read_white_space(path):
    result = []
    pattern = re.compile(r"^([0-9A-F]+)(?:\.\.([0-9A-F]+))?\s*;\s*White_Space\b")
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = pattern.match(line)
            if m:
                first = int(m.group(1), 16)
                last = int(m.group(2), 16) if m.group(2) else first
                result.extend(range(first, last + 1))
    return result


def read_mappings(path):
    """Simple lowercase mappings and canonical decompositions (without <tag>) of UnicodeData.txt."""
    lower = {}
    decomposition = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(";")
            if len(fields) < 14:
                continue
            cp = int(fields[0], 16)
            if fields[5] and not fields[5].startswith("<"):
                decomposition[cp] = [int(x, 16) for x in fields[5].split()]
            if fields[13]:
                lower[cp] = int(fields[13], 16)
    return lower, decomposition


def decomposition_heads(decomposition):
    """Code point -> first code point of its full canonical decomposition (applied recursively)."""
    heads = {}
    for cp in decomposition:
        head = cp
        while head in decomposition:
            head = decomposition[head][0]
        if head != cp:
            heads[cp] = head
    return heads


def write_table(out, type_name, name, count_name, rows, value_digits):
    """A C++ array of {code point, value} rows, as many to a line as fit in 99 columns."""
    out.write(f"const {type_name} {name}[{len(rows)}] = {{\n")
    line = "   "
    for cp, value in rows:
        item = f" {{0x{cp:05X}, 0x{value:0{value_digits}X}}},"
        if len(line) + len(item) > 99:
            out.write(line + "\n")
            line = "   "
        line += item
    out.write(line + "\n};\n")
    out.write(f"const size_t {count_name} = {len(rows)};\n\n")


def unicode_version(ucd_dir):
    readme = os.path.join(ucd_dir, "ReadMe.txt")
    try:
        with open(readme, encoding="utf-8") as f:
            m = re.search(r"Version (\d+\.\d+\.\d+)", f.read())
            if m:
                return m.group(1)
    except OSError:
        pass
    return "unknown"


def main():
    ucd_dir = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode"
    flags = read_categories(os.path.join(ucd_dir, "UnicodeData.txt"))
    for cp in read_white_space(os.path.join(ucd_dir, "PropList.txt")):
        flags[cp] |= WHITESPACE

    lower, decomposition = read_mappings(os.path.join(ucd_dir, "UnicodeData.txt"))

    ranges = []
    for cp, value in enumerate(flags):
        if not ranges or ranges[-1][1] != value:
            ranges.append((cp, value))

    out = sys.stdout
    out.write("// Generated by engine/tokenizer/gen_unicode_tables.py from the Unicode Character\n")
    out.write(f"// Database {unicode_version(ucd_dir)} (UnicodeData.txt, PropList.txt). Do not edit.\n")
    out.write('#include "engine/tokenizer/unicode.h"\n\n')
    out.write("namespace ggufd::tok::unicode::detail {\n\n")
    write_table(out, "CodePointRange", "kCodePointRanges", "kCodePointRangeCount", ranges, 3)
    write_table(out, "CodePointPair", "kLowercase", "kLowercaseCount", sorted(lower.items()), 5)
    heads = sorted(decomposition_heads(decomposition).items())
    write_table(out, "CodePointPair", "kDecompositionHead", "kDecompositionHeadCount", heads, 5)
    out.write("}  // namespace ggufd::tok::unicode::detail\n")


if __name__ == "__main__":
    main()
