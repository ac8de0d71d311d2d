// Shared by the chat tests: deterministic ids and feeding a reply in pieces.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "chat/parser.h"
#include "text/utf8.h"

namespace ggufd::chat::test {

// Ids call_0, call_1, ... so parses of the same text compare equal.
inline IdGenerator counter_ids() {
    auto next = std::make_shared<int>(0);
    return [next] { return "call_" + std::to_string((*next)++); };
}

inline ParserOptions options_for(Family family) {
    ParserOptions o;
    o.family = family;
    o.make_id = counter_ids();
    return o;
}

// Cuts `text` into pieces of the given sizes, repeated; size 0 means random sizes 1..8.
inline std::vector<std::string> split(std::string_view text, size_t size, std::mt19937& rng) {
    std::vector<std::string> pieces;
    std::uniform_int_distribution<size_t> random_size(1, 8);
    for (size_t at = 0; at < text.size();) {
        const size_t n = std::min(size == 0 ? random_size(rng) : size, text.size() - at);
        pieces.emplace_back(text.substr(at, n));
        at += n;
    }
    return pieces;
}

// Whether `s` is whole UTF-8 characters (no sequence cut at either end).
inline bool whole_utf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        if (!ggufd::text::next_well_formed(s, i)) return false;
    }
    return true;
}

// Markup of every family: none of it may reach content or reasoning from a well-formed reply.
inline const std::vector<std::string_view>& all_markup() {
    static const std::vector<std::string_view> markup = {"<tool_call>",
                                                         "</tool_call>",
                                                         "<function=",
                                                         "</function>",
                                                         "<parameter=",
                                                         "<arg_key>",
                                                         "<arg_value>",
                                                         "<|python_tag|>",
                                                         "[TOOL_CALLS]",
                                                         "[ARGS]",
                                                         "[CALL_ID]",
                                                         "<|channel|>",
                                                         "<|message|>",
                                                         "<|start|>",
                                                         "<|end|>",
                                                         "<|call|>",
                                                         "<|return|>",
                                                         "<|constrain|>",
                                                         "｜tool▁",
                                                         "｜DSML｜",
                                                         "<|tool_call",
                                                         "<|START_",
                                                         "<|END_",
                                                         "<|tool_calls_section",
                                                         "<tool_calls>",
                                                         "</tool_calls>",
                                                         "<think>",
                                                         "</think>",
                                                         "[THINK]",
                                                         "[/THINK]",
                                                         "<response>",
                                                         "</response>",
                                                         "[BEGIN FINAL RESPONSE]",
                                                         "[END FINAL RESPONSE]",
                                                         "functools["};
    return markup;
}

}  // namespace ggufd::chat::test
