// JSON Schema -> GBNF: the grammar of the JSON texts a constrained generation may write.
//
// The grammar is a subset of the schema's instances: every text it accepts parses as JSON and
// validates against the schema (given the caveats below), but not every valid instance is
// reachable. It is standard GBNF (`name ::= ...`, `|`, `( )`, `?` `*` `+` `{m,n}`, character
// classes, string literals, `root` as the start rule) using only the escapes \x \u \U \t \n \r
// \\ \" \[ \], so any GBNF reader accepts it.
//
// Supported keywords:
// - `type` (a name or an array of names), OpenAPI's `nullable: true`; without `type` the types
//   are inferred from the keywords present (e.g. `properties` -> object), and a schema with no
//   constraint at all, `{}` or `true`, is any JSON value. `false` is refused (nothing to write).
// - objects: `properties` (written in the order given), `required` (every name must be among
//   `properties`), `additionalProperties` (false; true or a schema: extra keys come after the
//   declared ones, spelled without escapes, and never equal to a declared name). Absent, it means
//   false when `properties` is given (as OpenAI's strict mode requires) and any keys otherwise.
// - arrays: `items` (a schema, or the older array form with `additionalItems`), `prefixItems`
//   (all written; extra items only when `items` allows them), `minItems`, `maxItems`,
//   `uniqueItems: false`.
// - `enum`, `const` (beside them only `type`, which filters the values), `anyOf`, `oneOf` (as
//   anyOf: exact when the branches are disjoint, as tool and tagged-union schemas are), `allOf`
//   when it has one branch or every branch is an object schema with distinct properties and no
//   `additionalProperties: false` (merged into one object), `$ref` to a JSON pointer in the same
//   document (`#`, `#/$defs/x`, `#/definitions/x`, ...; recursion allowed, a cycle that writes no
//   character first is refused), `$defs`/`definitions` as their containers.
// - strings: `minLength`/`maxLength` (in code points; \u escapes never write surrogates, so a
//   length is what a validator counts), `pattern`, `format` date, time, date-time (RFC 3339, with
//   a mandatory offset or Z, seconds 00-59, years 1000-9999, days checked against the month and
//   leap years) and uuid; any other format is refused. Only one of pattern, format and the
//   lengths may constrain a string.
// - `pattern` regex subset (ECMA-262 syntax, searched as JSON Schema says: unanchored unless the
//   branch begins with ^ / ends with $): literal characters, escapes of punctuation, \t \n \r \f
//   \v \0 \xHH \uHHHH, `.` (not a line terminator), classes [...] and [^...] with ranges, \d \w
//   \s \D \W \S (in and outside classes; \s as ASCII whitespace), groups ( ) and (?: ),
//   alternation |, quantifiers ? * + {n} {n,} {n,m} (a trailing lazy ? is accepted: it does not
//   change which strings match), ^ at the start and $ at the end of a top-level branch. Refused:
//   backreferences, lookaround, named groups, \b \B \p{..}, anchors elsewhere.
// - integers: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (numbers, or draft 4's
//   booleans) exactly, by digit-range grammars; bounds are rounded inward and must lie within
//   +-1e18. Without an upper bound an integer has at most 16 digits (or as many as its minimum).
// - numbers: the same four bounds when each is an integer (a fractional bound is refused), exactly:
//   a bounded number is written in plain decimal (no exponent), integer part then up to 16
//   fraction digits (ending in a non-zero digit where the integer part is an exclusive bound;
//   an inclusive upper bound is written without a fraction). Unbounded numbers: up to 16 integer
//   digits, 16 fraction digits, a 2-digit exponent.
// - `enum`/`const` values are written as compact JSON (nlohmann's dump: no spaces, strings with
//   raw UTF-8 and \u00xx for control characters).
// - counts (`minLength`, `maxItems`, ...) up to kMaxRepeat; schemas and enum values nested up to
//   64 levels.
// Annotations are ignored by name: title, description, examples, default, $schema, $id,
// $comment, deprecated, readOnly, writeOnly, and OpenAPI's discriminator (a hint beside oneOf).
// Any other keyword ($anchor, multipleOf, not,
// patternProperties, ...) is refused with a SchemaError naming it.
//
// A character a pattern constrains has one spelling: \" \\ \n \t \r \b \f, \u00xx for the other
// control characters, itself otherwise.
//
// Whitespace: between JSON tokens (after `{`, `[`, `,`, `:`, a key, and each value inside an
// object or array) the grammar allows nothing, one space, or one newline followed by up to 32
// spaces or tabs: compact and pretty-printed JSON both fit, and a model cannot fill its budget
// with blank space. The text has no whitespace before or after the root value.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ggufd::grammar {

// The largest count a schema may ask for (string lengths, array sizes, regex repetitions): the
// largest repetition a GBNF reader need accept (engine_grammar's Limits::max_repetition).
inline constexpr uint64_t kMaxRepeat = 10000;

// A schema the converter refuses: pointer() is the JSON pointer of the offending keyword (or of
// the schema that cannot be written), so the API can name it in its 400.
class SchemaError : public std::invalid_argument {
  public:
    SchemaError(std::string pointer, const std::string& message);
    const std::string& pointer() const { return pointer_; }

  private:
    std::string pointer_;
};

// The grammar of the texts valid against `schema` (key order as the client wrote it).
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);

// The grammar of `response_format: {"type": "json_object"}`: any JSON object.
std::string json_object_gbnf();

// GBNF spellings as the converter writes them, for other writers of grammars (chat/'s tool-call
// grammars): a string literal of UTF-8 text (SchemaError when it is not UTF-8), one code point
// inside a character class, and items in sequence (empty ones left out).
std::string gbnf_literal(std::string_view utf8);
std::string gbnf_class_char(uint32_t cp);
std::string gbnf_sequence(const std::vector<std::string>& items);

}  // namespace ggufd::grammar
