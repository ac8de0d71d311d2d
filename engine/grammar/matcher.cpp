#include "engine/grammar/matcher.h"

#include <algorithm>
#include <string>
#include <utility>

namespace ggufd::grammar {
namespace {

constexpr uint32_t kMinOfLength[5] = {0, 0, 0x80, 0x800, 0x10000};

// Expands rule references at the top of `stack` until every resulting stack has a character
// set on top (or is empty), appending them to `out`.
void expand(const Grammar& g, Stack stack, std::vector<Stack>& out, std::vector<Stack>& work,
            size_t& elements, const MatchLimits& limits) {
    work.clear();
    work.push_back(std::move(stack));
    while (!work.empty()) {
        Stack s = std::move(work.back());
        work.pop_back();
        while (!s.empty() && g.element(s.back()).kind == Element::Kind::end) s.pop_back();
        if (s.empty() || g.element(s.back()).kind == Element::Kind::chars) {
            if (out.size() >= limits.max_stacks) {
                throw MatchLimitError("the grammar is too ambiguous to follow: more than " +
                                      std::to_string(limits.max_stacks) +
                                      " ways to continue at once");
            }
            elements += s.size();
            if (elements > limits.max_elements) {
                throw MatchLimitError(
                    "the grammar is too ambiguous to follow: its ways to "
                    "continue hold more than " +
                    std::to_string(limits.max_elements) + " elements");
            }
            out.push_back(std::move(s));
            continue;
        }
        const uint32_t pos = s.back();
        const uint32_t rule = g.element(pos).value;
        s.pop_back();
        // What follows the reference; not pushed when the reference ends its alternative.
        if (g.element(pos + 1).kind != Element::Kind::end) s.push_back(pos + 1);
        if (s.size() + 1 > limits.max_depth) {
            throw MatchLimitError("the text nests deeper than the grammar matcher follows (" +
                                  std::to_string(limits.max_depth) + " elements)");
        }
        const auto alts = g.alternatives(rule);
        for (size_t i = 0; i < alts.size(); ++i) {
            Stack next = i + 1 < alts.size() ? s : std::move(s);
            next.push_back(alts[i]);
            work.push_back(std::move(next));
        }
    }
}

void canonical(std::vector<Stack>& stacks) {
    std::sort(stacks.begin(), stacks.end());
    stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

// Keeps the stacks whose character set meets what the pending character can become.
bool narrow(const Grammar& g, const Position& from, Position& to) {
    uint32_t lo = 0, hi = 0;
    if (!to.utf8.possible_range(lo, hi)) return false;
    for (const Stack& s : from.stacks) {
        if (!s.empty() && g.intersects(g.element(s.back()).value, lo, hi)) to.stacks.push_back(s);
    }
    return !to.stacks.empty();
}

bool advance_code_point(const Grammar& g, const Position& from, uint32_t cp, Position& to,
                        const MatchLimits& limits) {
    thread_local std::vector<Stack> work;  // scratch: this runs for every new transition
    size_t elements = 0;
    for (const Stack& s : from.stacks) {
        if (s.empty() || !g.contains(g.element(s.back()).value, cp)) continue;
        Stack next = s;
        ++next.back();  // the element after the character set
        expand(g, std::move(next), to.stacks, work, elements, limits);
    }
    canonical(to.stacks);
    return !to.stacks.empty();
}

}  // namespace

Utf8Decoder::Step Utf8Decoder::step(uint8_t byte, uint32_t& cp) {
    if (need == 0) {
        if (byte < 0x80) {
            cp = byte;
            return Step::complete;
        }
        const uint8_t n = byte >= 0xC2 && byte <= 0xDF   ? 2
                          : byte >= 0xE0 && byte <= 0xEF ? 3
                          : byte >= 0xF0 && byte <= 0xF4 ? 4
                                                         : 0;
        if (n == 0) return Step::invalid;
        length = n;
        need = static_cast<uint8_t>(n - 1);
        partial = byte & (0x7Fu >> n);
        return Step::pending;
    }
    if ((byte & 0xC0) != 0x80) return Step::invalid;
    const uint32_t bits = (partial << 6) | (byte & 0x3Fu);
    if (need > 1) {
        partial = bits;
        --need;
        return Step::pending;
    }
    if (bits < kMinOfLength[length] || bits > kMaxCodePoint || (bits >= 0xD800 && bits <= 0xDFFF)) {
        return Step::invalid;
    }
    *this = Utf8Decoder{};
    cp = bits;
    return Step::complete;
}

bool Utf8Decoder::possible_range(uint32_t& lo, uint32_t& hi) const {
    const uint32_t shift = 6u * need;
    lo = std::max(partial << shift, kMinOfLength[length]);
    hi = std::min((partial << shift) | ((1u << shift) - 1), kMaxCodePoint);
    if (lo >= 0xD800 && hi <= 0xDFFF) return false;  // surrogates only
    return lo <= hi;
}

size_t Position::hash() const {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t{utf8.partial} << 16) ^
                 (uint64_t{utf8.need} << 8) ^ utf8.length;
    for (const Stack& s : stacks) {
        h = (h ^ s.size()) * 0x100000001B3ull;
        for (uint32_t v : s) h = (h ^ v) * 0x100000001B3ull;
    }
    return static_cast<size_t>(h ^ (h >> 29));
}

size_t Position::memory_bytes() const {
    size_t n = sizeof(*this) + stacks.capacity() * sizeof(Stack);
    for (const Stack& s : stacks) n += s.capacity() * sizeof(uint32_t);
    return n;
}

Position initial_position(const Grammar& grammar, const MatchLimits& limits) {
    Position p;
    std::vector<Stack> work;
    size_t elements = 0;
    for (uint32_t alt : grammar.alternatives(grammar.root())) {
        expand(grammar, Stack{alt}, p.stacks, work, elements, limits);
    }
    canonical(p.stacks);
    return p;
}

bool advance(const Grammar& g, const Position& from, uint8_t byte, Position& to,
             const MatchLimits& limits) {
    to.stacks.clear();
    to.utf8 = from.utf8;
    uint32_t cp = 0;
    switch (to.utf8.step(byte, cp)) {
        case Utf8Decoder::Step::invalid:
            to.utf8 = Utf8Decoder{};
            return false;
        case Utf8Decoder::Step::pending:
            if (narrow(g, from, to)) return true;
            to = Position{};
            return false;
        case Utf8Decoder::Step::complete:
            break;
    }
    return advance_code_point(g, from, cp, to, limits);
}

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, MatchLimits limits)
    : grammar_(std::move(grammar)), limits_(limits) {
    position_ = initial_position(*grammar_, limits_);
}

bool Matcher::accept(std::string_view bytes) {
    Position p = position_;
    for (char c : bytes) {
        if (!advance(*grammar_, p, static_cast<uint8_t>(c), scratch_, limits_)) return false;
        std::swap(p, scratch_);
    }
    position_ = std::move(p);
    return true;
}

bool matches(const Grammar& grammar, std::string_view text) {
    Position p = initial_position(grammar);
    Position next;
    for (char c : text) {
        if (!advance(grammar, p, static_cast<uint8_t>(c), next)) return false;
        std::swap(p, next);
    }
    return p.complete();
}

}  // namespace ggufd::grammar
