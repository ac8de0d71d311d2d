#include "engine/grammar/grammar.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace ggufd::grammar {

Error::Error(const std::string& message, int line, int column)
    : std::runtime_error("line " + std::to_string(line) + ", column " + std::to_string(column) +
                         ": " + message),
      message_(message),
      line_(line),
      column_(column) {}

namespace {

// The first range whose upper end reaches cp.
const CharRange* reaching(std::span<const CharRange> ranges, uint32_t cp) {
    return std::lower_bound(ranges.data(), ranges.data() + ranges.size(), cp,
                            [](const CharRange& x, uint32_t v) { return x.hi < v; });
}

}  // namespace

bool ranges_meet(std::span<const CharRange> ranges, uint32_t lo, uint32_t hi) {
    const CharRange* r = reaching(ranges, lo);
    return r != ranges.data() + ranges.size() && r->lo <= hi;
}

bool ranges_cover(std::span<const CharRange> ranges, uint32_t lo, uint32_t hi) {
    // Disjoint and not adjacent: one range holds all of [lo, hi] or none does.
    const CharRange* r = reaching(ranges, lo);
    return r != ranges.data() + ranges.size() && r->lo <= lo && r->hi >= hi;
}

bool Grammar::contains_slow(const Set& s, uint32_t cp) const {
    return ranges_meet({ranges_.data() + s.begin, ranges_.data() + s.end}, cp, cp);
}

bool Grammar::intersects(uint32_t set, uint32_t lo, uint32_t hi) const {
    return ranges_meet(ranges(set), lo, hi);
}

bool Grammar::covers(uint32_t set, uint32_t lo, uint32_t hi) const {
    return ranges_cover(ranges(set), lo, hi);
}

bool Grammar::same_compiled_form(const Grammar& other) const {
    const auto same_elements = [](const Element& a, const Element& b) {
        return a.kind == b.kind && a.value == b.value;
    };
    const auto same_ranges = [](const CharRange& a, const CharRange& b) {
        return a.lo == b.lo && a.hi == b.hi;
    };
    const auto same_sets = [](const Set& a, const Set& b) {
        return a.begin == b.begin && a.end == b.end;
    };
    return root_ == other.root_ && rule_alts_ == other.rule_alts_ &&
           alt_starts_ == other.alt_starts_ &&
           std::equal(elements_.begin(), elements_.end(), other.elements_.begin(),
                      other.elements_.end(), same_elements) &&
           std::equal(sets_.begin(), sets_.end(), other.sets_.begin(), other.sets_.end(),
                      same_sets) &&
           std::equal(ranges_.begin(), ranges_.end(), other.ranges_.begin(), other.ranges_.end(),
                      same_ranges);
}

size_t Grammar::fingerprint() const {
    uint64_t h = 0xCBF29CE484222325ull ^ root_;
    const auto add = [&h](uint64_t v) { h = (h ^ v) * 0x100000001B3ull; };
    for (uint32_t v : rule_alts_) add(v);
    for (uint32_t v : alt_starts_) add(v);
    for (const Element& e : elements_) add((uint64_t{e.value} << 8) | static_cast<uint8_t>(e.kind));
    for (const CharRange& r : ranges_) add((uint64_t{r.lo} << 32) | r.hi);
    add(sets_.size());
    return static_cast<size_t>(h ^ (h >> 31));
}

size_t Grammar::memory_bytes() const {
    size_t n = sizeof(*this) + rule_alts_.size() * 4 + alt_starts_.size() * 4 +
               elements_.size() * sizeof(Element) + sets_.size() * sizeof(Set) +
               ranges_.size() * sizeof(CharRange);
    for (const std::string& s : rule_names_) n += s.capacity();
    return n;
}

namespace {

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string quoted(char c) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
        static const char* const kHex = "0123456789abcdef";
        const auto b = static_cast<unsigned char>(c);
        return std::string("byte 0x") + kHex[b >> 4] + kHex[b & 15];
    }
    return std::string("'") + c + "'";
}

}  // namespace

// Parses GBNF text into rules of sequences, then flattens them into a Grammar.
class Compiler {
  public:
    Compiler(std::string_view text, const Limits& limits) : text_(text), limits_(limits) {}

    Grammar run() {
        if (text_.size() > limits_.max_text_bytes) {
            fail(0, "the grammar is " + std::to_string(text_.size()) +
                        " bytes, more than the limit of " + std::to_string(limits_.max_text_bytes));
        }
        skip_space(true);
        while (pos_ < text_.size()) {
            parse_rule();
            skip_space(true);
        }
        for (const Rule& r : rules_) {
            if (!r.defined) fail(r.first_use, "undefined rule '" + r.name + "'");
        }
        const auto root = ids_.find("root");
        if (root == ids_.end()) fail(0, "the grammar has no 'root' rule");
        check_left_recursion();
        return flatten(root->second);
    }

  private:
    using Item = Element;  // a rule reference or a character set, as compiled
    using Seq = std::vector<Item>;
    struct Rule {
        std::string name;
        std::vector<Seq> alts;
        bool defined = false;
        size_t where = 0;      // definition (helper rules: their rule's definition)
        size_t first_use = 0;  // the first reference, for "undefined rule"
    };

    // Line and column (bytes, from 1) of a byte offset.
    std::pair<int, int> line_column(size_t at) const {
        at = std::min(at, text_.size());
        int line = 1;
        size_t line_start = 0;
        for (size_t i = 0; i < at; ++i) {
            if (text_[i] == '\n') {
                ++line;
                line_start = i + 1;
            }
        }
        return {line, static_cast<int>(at - line_start) + 1};
    }

    [[noreturn]] void fail(size_t at, const std::string& message) const {
        const auto [line, column] = line_column(at);
        throw Error(message, line, column);
    }

    bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

    // Spaces, tabs and comments; line ends too when `newlines` (inside groups, after '|').
    void skip_space(bool newlines) {
        while (pos_ < text_.size()) {
            const char c = text_[pos_];
            if (c == ' ' || c == '\t') {
                ++pos_;
            } else if (c == '#') {
                while (pos_ < text_.size() && text_[pos_] != '\n' && text_[pos_] != '\r') ++pos_;
            } else if (newlines && (c == '\n' || c == '\r')) {
                ++pos_;
            } else {
                break;
            }
        }
    }

    uint32_t rule_id(const std::string& name, size_t use) {
        const auto [it, inserted] = ids_.try_emplace(name, static_cast<uint32_t>(rules_.size()));
        if (inserted) {
            check_rule_budget(use);
            rules_.push_back(Rule{name, {}, false, 0, use});
        }
        return it->second;
    }

    void check_rule_budget(size_t at) const {
        if (rules_.size() + 1 > limits_.max_rules) {
            fail(at, "the grammar needs more than " + std::to_string(limits_.max_rules) +
                         " rules (repetitions count as rules)");
        }
    }

    void count_elements(size_t at, size_t n) {
        elements_ += n;
        if (elements_ > limits_.max_elements) {
            fail(at, "the grammar expands to more than " + std::to_string(limits_.max_elements) +
                         " elements (repetition counts multiply)");
        }
    }

    // A rule the rewriting adds, named after the rule it serves.
    uint32_t helper_rule(uint32_t parent, std::vector<Seq> alts, size_t at) {
        check_rule_budget(at);
        const uint32_t id = static_cast<uint32_t>(rules_.size());
        std::string name = rules_[parent].name + "_" + std::to_string(id);
        size_t n = 0;
        for (const Seq& s : alts) n += s.size() + 1;
        count_elements(at, n);
        rules_.push_back(Rule{std::move(name), std::move(alts), true, rules_[parent].where, at});
        return id;
    }

    std::string parse_name() {
        const size_t start = pos_;
        while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
        return std::string(text_.substr(start, pos_ - start));
    }

    void parse_rule() {
        const size_t start = pos_;
        const std::string name = parse_name();
        if (name.empty()) fail(pos_, "expected a rule name, found " + quoted(text_[pos_]));
        skip_space(false);
        if (text_.substr(pos_, 3) != "::=") fail(pos_, "expected '::=' after '" + name + "'");
        pos_ += 3;
        skip_space(true);
        const uint32_t id = rule_id(name, start);
        if (rules_[id].defined) fail(start, "rule '" + name + "' is defined twice");
        rules_[id].defined = true;
        rules_[id].where = start;
        std::vector<Seq> alts = parse_alternatives(id, 0);
        if (pos_ < text_.size() && !at('\n') && !at('\r')) {
            fail(pos_, "expected the end of the line after rule '" + name + "', found " +
                           quoted(text_[pos_]));
        }
        size_t n = 0;
        for (const Seq& s : alts) n += s.size() + 1;
        count_elements(start, n);
        rules_[id].alts = std::move(alts);
    }

    std::vector<Seq> parse_alternatives(uint32_t rule, int depth) {
        std::vector<Seq> alts;
        alts.push_back(parse_sequence(rule, depth));
        while (at('|')) {
            ++pos_;
            skip_space(true);
            alts.push_back(parse_sequence(rule, depth));
        }
        return alts;
    }

    Seq parse_sequence(uint32_t rule, int depth) {
        Seq seq;
        size_t last = SIZE_MAX;  // where the item a repetition applies to starts in seq
        while (pos_ < text_.size()) {
            const size_t start = pos_;
            const char c = text_[pos_];
            if (c == '"') {
                last = seq.size();
                parse_literal(seq);
            } else if (c == '[') {
                last = seq.size();
                seq.push_back({Element::Kind::chars, parse_class()});
            } else if (c == '.') {
                ++pos_;
                last = seq.size();
                seq.push_back({Element::Kind::chars, intern({{0, kMaxCodePoint}})});
            } else if (is_name_char(c)) {
                last = seq.size();
                seq.push_back({Element::Kind::rule, rule_id(parse_name(), start)});
            } else if (c == '(') {
                if (depth + 1 > limits_.max_nesting) {
                    fail(pos_, "groups nest deeper than " + std::to_string(limits_.max_nesting));
                }
                ++pos_;
                skip_space(true);
                std::vector<Seq> alts = parse_alternatives(rule, depth + 1);
                if (!at(')')) {
                    const std::string found =
                        pos_ < text_.size() ? quoted(text_[pos_]) : "the end of the grammar";
                    fail(pos_, "expected ')' to close the group opened at " + where(start) +
                                   ", found " + found);
                }
                ++pos_;
                last = seq.size();
                if (alts.size() == 1 && alts[0].size() == 1) {
                    seq.push_back(alts[0][0]);
                } else {
                    seq.push_back({Element::Kind::rule, helper_rule(rule, std::move(alts), start)});
                }
            } else if (c == '*' || c == '+' || c == '?' || c == '{') {
                if (last == SIZE_MAX) {
                    fail(pos_, "repetition " + quoted(c) + " has no item before it to repeat");
                }
                uint32_t min = 0, max = UINT32_MAX;  // UINT32_MAX: unbounded
                if (c == '{') {
                    parse_bounds(min, max);
                } else {
                    ++pos_;
                    if (c == '+') min = 1;
                    if (c == '?') max = 1;
                }
                repeat(rule, seq, last, min, max, start);
            } else {
                break;
            }
            skip_space(depth > 0);
        }
        return seq;
    }

    std::string where(size_t at) const {
        const auto [line, column] = line_column(at);
        return "line " + std::to_string(line) + ", column " + std::to_string(column);
    }

    uint32_t parse_count(size_t brace) {
        const size_t start = pos_;
        uint64_t v = 0;
        while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
            v = v * 10 + static_cast<uint64_t>(text_[pos_] - '0');
            if (v > limits_.max_repetition) {
                fail(start, "repetition count exceeds the limit of " +
                                std::to_string(limits_.max_repetition));
            }
            ++pos_;
        }
        if (pos_ == start) fail(brace, "bad repetition bounds: expected a number");
        return static_cast<uint32_t>(v);
    }

    void parse_bounds(uint32_t& min, uint32_t& max) {
        const size_t brace = pos_;
        ++pos_;
        skip_space(false);
        min = 0;
        if (!at(',')) min = parse_count(brace);
        skip_space(false);
        if (at(',')) {
            ++pos_;
            skip_space(false);
            max = at('}') ? UINT32_MAX : parse_count(brace);
            skip_space(false);
        } else {
            max = min;
        }
        if (!at('}')) fail(pos_, "bad repetition bounds: expected '}'");
        ++pos_;
        if (max < min) {
            fail(brace, "bad repetition bounds: the minimum " + std::to_string(min) +
                            " exceeds the maximum " + std::to_string(max));
        }
    }

    // Replaces seq[last..] (the item before the operator) by its repetition.
    void repeat(uint32_t rule, Seq& seq, size_t last, uint32_t min, uint32_t max, size_t at) {
        if (seq.size() == last) return;  // an empty literal: any number of it is still nothing
        Item item = seq[last];
        if (seq.size() - last != 1) {  // a literal of several characters: one helper rule
            std::vector<Seq> alts{Seq(seq.begin() + static_cast<std::ptrdiff_t>(last), seq.end())};
            item = {Element::Kind::rule, helper_rule(rule, std::move(alts), at)};
        }
        seq.resize(last);
        count_elements(at, min);
        for (uint32_t i = 0; i < min; ++i) seq.push_back(item);
        if (max == UINT32_MAX) {
            // R ::= item R | (empty)
            const uint32_t r = helper_rule(rule, {Seq{}, Seq{}}, at);
            rules_[r].alts[0] = {item, {Element::Kind::rule, r}};
            count_elements(at, 2);
            seq.push_back({Element::Kind::rule, r});
        } else if (max > min) {
            // O_1 ::= item | (empty); O_k ::= item O_(k-1) | (empty)
            uint32_t inner = helper_rule(rule, {Seq{item}, Seq{}}, at);
            for (uint32_t k = 1; k < max - min; ++k) {
                inner = helper_rule(rule, {Seq{item, {Element::Kind::rule, inner}}, Seq{}}, at);
            }
            seq.push_back({Element::Kind::rule, inner});
        }
    }

    void parse_literal(Seq& seq) {
        const size_t open = pos_;
        ++pos_;
        while (true) {
            if (pos_ >= text_.size()) fail(open, "unterminated string literal");
            if (at('"')) break;
            const uint32_t cp = parse_char();
            seq.push_back({Element::Kind::chars, intern_char(cp)});
        }
        ++pos_;
    }

    uint32_t parse_class() {
        const size_t open = pos_;
        ++pos_;
        const bool negated = at('^');
        if (negated) ++pos_;
        std::vector<CharRange> ranges;
        while (true) {
            if (pos_ >= text_.size()) fail(open, "unterminated character class");
            if (at(']')) break;
            const size_t start = pos_;
            const uint32_t lo = parse_char();
            uint32_t hi = lo;
            if (at('-') && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
                ++pos_;
                hi = parse_char();
                if (hi < lo)
                    fail(start, "character range is reversed (its end precedes its start)");
            }
            ranges.push_back({lo, hi});
        }
        ++pos_;
        ranges = normalize(std::move(ranges));
        if (negated) ranges = complement(ranges);
        return intern(std::move(ranges));
    }

    // One character of a literal or class: an escape or one UTF-8 encoded code point.
    uint32_t parse_char() {
        const size_t start = pos_;
        const auto b = static_cast<unsigned char>(text_[pos_]);
        if (b == '\\') {
            if (pos_ + 1 >= text_.size()) fail(start, "unterminated escape");
            const char e = text_[pos_ + 1];
            pos_ += 2;
            switch (e) {
                case 'n':
                    return '\n';
                case 'r':
                    return '\r';
                case 't':
                    return '\t';
                case '\\':
                    return '\\';
                case '"':
                    return '"';
                case '[':
                    return '[';
                case ']':
                    return ']';
                case 'x':
                    return parse_hex(start, 2);
                case 'u':
                    return parse_hex(start, 4);
                case 'U':
                    return parse_hex(start, 8);
                default:
                    fail(start, "unknown escape '\\" + std::string(1, e) + "'");
            }
        }
        const std::optional<uint32_t> cp = text::next_well_formed(text_, pos_);
        if (!cp) fail(start, "invalid UTF-8 in the grammar");
        return *cp;
    }

    uint32_t parse_hex(size_t start, int digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i) {
            const int d = pos_ < text_.size() ? hex_value(text_[pos_]) : -1;
            if (d < 0) {
                fail(start, "escape needs " + std::to_string(digits) + " hexadecimal digits");
            }
            v = (v << 4) | static_cast<uint32_t>(d);
            ++pos_;
        }
        if (v > kMaxCodePoint) fail(start, "escape is beyond the last code point U+10FFFF");
        return v;
    }

    static std::vector<CharRange> normalize(std::vector<CharRange> r) {
        std::sort(r.begin(), r.end(),
                  [](const CharRange& a, const CharRange& b) { return a.lo < b.lo; });
        std::vector<CharRange> out;
        for (const CharRange& x : r) {
            if (!out.empty() && x.lo <= out.back().hi + 1) {
                out.back().hi = std::max(out.back().hi, x.hi);
            } else {
                out.push_back(x);
            }
        }
        return out;
    }

    static std::vector<CharRange> complement(const std::vector<CharRange>& r) {
        std::vector<CharRange> out;
        uint32_t next = 0;
        for (const CharRange& x : r) {
            if (x.lo > next) out.push_back({next, x.lo - 1});
            next = x.hi + 1;
        }
        if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
        return out;
    }

    // Literal characters are most of a grammar's sets: looked up without building a range list.
    uint32_t intern_char(uint32_t cp) {
        const auto it = chars_.find(cp);
        if (it != chars_.end()) return it->second;
        const uint32_t id = intern({{cp, cp}});
        chars_.emplace(cp, id);
        return id;
    }

    uint32_t intern(std::vector<CharRange> ranges) {
        std::vector<std::pair<uint32_t, uint32_t>> key;
        key.reserve(ranges.size());
        for (const CharRange& x : ranges) key.emplace_back(x.lo, x.hi);
        const auto [it, inserted] = sets_.try_emplace(std::move(key), set_ranges_.size());
        if (inserted) set_ranges_.push_back(std::move(ranges));
        return static_cast<uint32_t>(it->second);
    }

    // A rule that can reach itself before consuming a character would make top-down expansion
    // loop: find such a cycle through the "can start with" references.
    void check_left_recursion() const {
        const size_t n = rules_.size();
        std::vector<char> nullable(n, 0);
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t r = 0; r < n; ++r) {
                if (nullable[r]) continue;
                for (const Seq& s : rules_[r].alts) {
                    const bool all = std::all_of(s.begin(), s.end(), [&](const Item& it) {
                        return it.kind == Element::Kind::rule && nullable[it.value];
                    });
                    if (all) {
                        nullable[r] = 1;
                        changed = true;
                        break;
                    }
                }
            }
        }
        std::vector<std::vector<uint32_t>> starts(n);
        for (size_t r = 0; r < n; ++r) {
            for (const Seq& s : rules_[r].alts) {
                for (const Item& it : s) {
                    if (it.kind != Element::Kind::rule) break;
                    starts[r].push_back(it.value);
                    if (!nullable[it.value]) break;
                }
            }
        }
        // Iterative depth-first search; colour 1: on the current path, 2: done.
        std::vector<char> colour(n, 0);
        std::vector<std::pair<uint32_t, size_t>> path;
        for (uint32_t s = 0; s < n; ++s) {
            if (colour[s]) continue;
            path.push_back({s, 0});
            colour[s] = 1;
            while (!path.empty()) {
                auto& [r, next] = path.back();
                if (next == starts[r].size()) {
                    colour[r] = 2;
                    path.pop_back();
                    continue;
                }
                const uint32_t t = starts[r][next++];
                if (colour[t] == 1) {
                    std::string cycle;
                    size_t i = 0;
                    while (path[i].first != t) ++i;
                    for (; i < path.size(); ++i) cycle += rules_[path[i].first].name + " -> ";
                    cycle += rules_[t].name;
                    fail(rules_[t].where,
                         "left recursion (" + cycle +
                             "): a rule must consume a character before it can recur, and a "
                             "repeated item must not match the empty string");
                }
                if (colour[t] == 0) {
                    colour[t] = 1;
                    path.push_back({t, 0});
                }
            }
        }
    }

    Grammar flatten(uint32_t root) {
        Grammar g;
        g.root_ = root;
        g.rule_alts_.push_back(0);
        for (Rule& r : rules_) {
            g.rule_names_.push_back(std::move(r.name));
            for (const Seq& s : r.alts) {
                g.alt_starts_.push_back(static_cast<uint32_t>(g.elements_.size()));
                g.elements_.insert(g.elements_.end(), s.begin(), s.end());
                g.elements_.push_back({Element::Kind::end, 0});
            }
            g.rule_alts_.push_back(static_cast<uint32_t>(g.alt_starts_.size()));
        }
        for (const std::vector<CharRange>& ranges : set_ranges_) {
            Grammar::Set s;
            s.begin = static_cast<uint32_t>(g.ranges_.size());
            for (const CharRange& x : ranges) {
                g.ranges_.push_back(x);
                for (uint32_t c = x.lo; c <= std::min(x.hi, 127u); ++c) {
                    s.ascii[c >> 6] |= uint64_t{1} << (c & 63);
                }
            }
            s.end = static_cast<uint32_t>(g.ranges_.size());
            g.sets_.push_back(s);
        }
        return g;
    }

    std::string_view text_;
    Limits limits_;
    size_t pos_ = 0;
    size_t elements_ = 0;
    std::vector<Rule> rules_;
    std::unordered_map<std::string, uint32_t> ids_;
    std::map<std::vector<std::pair<uint32_t, uint32_t>>, size_t> sets_;
    std::unordered_map<uint32_t, uint32_t> chars_;  // one-character sets, by code point
    std::vector<std::vector<CharRange>> set_ranges_;
};

Grammar Grammar::parse(std::string_view text, const Limits& limits) {
    return Compiler(text, limits).run();
}

}  // namespace ggufd::grammar
