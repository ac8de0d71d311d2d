#include <gtest/gtest.h>

#include "engine/template/chat_template.h"

namespace {

using ggufd::tmpl::Template;
using ggufd::tmpl::TemplateError;
using json = nlohmann::ordered_json;

std::string render(const std::string& src, const json& ctx = json::object()) {
    return Template::compile(src).render(ctx);
}

TEST(TemplateBasics, Text) {
    EXPECT_EQ(render("hello"), "hello");
}

}  // namespace
