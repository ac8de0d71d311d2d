// Helpers the template test files share: render a source with a JSON context, check a table
// of (source, context, expected) cases, and expect an error by a fragment of its message.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "jinja/chat_template.h"

namespace ggufd::jinja::testing {

struct RenderCase {
    const char* source;
    const char* context;
    const char* expected;
};

inline std::string render(const std::string& src,
                          const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object(),
                          const RenderOptions& options = {}) {
    return Template::compile(src).render_text(ctx, options);
}

template <std::size_t N>
void expect_all(const RenderCase (&cases)[N]) {
    for (const RenderCase& c : cases) {
        SCOPED_TRACE(c.source);
        try {
            EXPECT_EQ(render(c.source, nlohmann::ordered_json::parse(c.context)), c.expected);
        } catch (const TemplateError& e) {
            ADD_FAILURE() << "render failed: " << e.what();
        }
    }
}

// Runs `src`, expecting a TemplateError whose what() contains `needle`; returns the error.
inline TemplateError expect_error(
    const std::string& src, const std::string& needle,
    const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object(),
    const RenderOptions& options = {}) {
    try {
        render(src, ctx, options);
    } catch (const TemplateError& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
            << "error was: " << e.what();
        return e;
    }
    ADD_FAILURE() << "no error for: " << src;
    return TemplateError("none");
}

}  // namespace ggufd::jinja::testing
