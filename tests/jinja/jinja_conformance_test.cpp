// Every case of ../shared/conformance/chat_templates/cases.jsonl (rendered by real Jinja2 the
// way Hugging Face renders chat templates) must render to exactly `expected`, or fail where the
// case records an `error`.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "jinja/chat_template.h"
#include "tests/support/conformance.h"

namespace {

using ggufd::jinja::RenderOptions;
using ggufd::jinja::Template;
using ggufd::jinja::TemplateError;

struct Case {
    std::string name;  // test name: template and case, sanitized
    std::string template_file;
    nlohmann::ordered_json context;
    bool expect_error = false;
    std::string expected;
};

// Keeps gtest from dumping the struct's bytes when naming a failing case.
void PrintTo(const Case& c, std::ostream* os) {
    *os << c.name;
}

std::string sanitize(const std::string& s) {
    std::string out;
    for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return out;
}

std::vector<Case> load_cases() {
    std::vector<Case> cases;
    std::filesystem::path dir = ggufd::testing::conformance_dir();
    if (dir.empty()) return cases;
    std::ifstream in(dir / "chat_templates" / "cases.jsonl");
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        auto j = nlohmann::ordered_json::parse(line);
        Case c;
        c.template_file = j.at("template").get<std::string>();
        std::string stem = c.template_file.substr(0, c.template_file.rfind('.'));
        c.name = sanitize(stem + "__" + j.at("case").get<std::string>());
        c.context = j.at("context");
        if (j.contains("error")) {
            c.expect_error = true;
        } else {
            c.expected = j.at("expected").get<std::string>();
        }
        cases.push_back(std::move(c));
    }
    return cases;
}

const std::vector<Case>& all_cases() {
    static const std::vector<Case> cases = load_cases();
    return cases;
}

// The conformance data was rendered with strftime_now fixed at 2024-07-26 12:00:00.
std::tm fixed_time() {
    std::tm tm{};
    tm.tm_year = 2024 - 1900;
    tm.tm_mon = 6;
    tm.tm_mday = 26;
    tm.tm_hour = 12;
    std::time_t t = timegm(&tm);  // fills in weekday and day of year
    gmtime_r(&t, &tm);
    return tm;
}

const Template& compiled(const std::filesystem::path& file) {
    static std::map<std::string, Template> cache;
    auto it = cache.find(file.string());
    if (it == cache.end()) {
        std::ifstream in(file, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        it = cache.emplace(file.string(), Template::compile(ss.str())).first;
    }
    return it->second;
}

class ChatTemplateConformance : public ::testing::TestWithParam<Case> {};

TEST_P(ChatTemplateConformance, RendersLikeJinja2) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const Case& c = GetParam();
    const Template& t = compiled(dir / "chat_templates" / "templates" / c.template_file);
    RenderOptions options;
    options.now = fixed_time;
    if (c.expect_error) {
        EXPECT_THROW(t.render_text(c.context, options), TemplateError);
        return;
    }
    std::string out;
    try {
        out = t.render_text(c.context, options);
    } catch (const TemplateError& e) {
        FAIL() << "render failed: " << e.what();
    }
    EXPECT_EQ(out, c.expected);
}

// The strings a client supplies in a chat context: everything but bos/eos and the generation
// flag, at any depth, keys included.
bool is_server_variable(const std::string& key) {
    return key == "bos_token" || key == "eos_token" || key == "add_generation_prompt";
}

void collect_strings(const nlohmann::ordered_json& j, std::vector<std::string>& out) {
    if (j.is_string()) out.push_back(j.get<std::string>());
    if (j.is_object()) {
        for (auto it = j.begin(); it != j.end(); ++it) {
            out.push_back(it.key());
            collect_strings(it.value(), out);
        }
    }
    if (j.is_array()) {
        for (const auto& e : j) collect_strings(e, out);
    }
}

bool any_contains(const std::vector<std::string>& strings, const std::string& part) {
    for (const std::string& s : strings) {
        if (s.find(part) != std::string::npos) return true;
    }
    return false;
}

bool inside_ranges(const ggufd::jinja::Rendered& r, size_t begin, size_t end) {
    for (const auto& [b, e] : r.content_ranges) {
        if (b <= begin && end <= e) return true;
    }
    return false;
}

// Content tracking leaves the text as it was, and its ranges cover each message's content
// where the template prints it unchanged, and nothing but what the client sent.
TEST_P(ChatTemplateConformance, ContentRangesCoverTheClientsText) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const Case& c = GetParam();
    if (c.expect_error) return;
    const Template& t = compiled(dir / "chat_templates" / "templates" / c.template_file);
    RenderOptions options;
    options.now = fixed_time;
    std::vector<std::string> client;
    for (auto it = c.context.begin(); it != c.context.end(); ++it) {
        if (is_server_variable(it.key())) continue;
        options.content_variables.push_back(it.key());
        collect_strings(it.value(), client);
    }
    std::vector<std::string> markers = {"<|", "[INST]", "<start_of_turn>", "<end_of_turn>"};
    for (const char* token : {"bos_token", "eos_token"}) {
        if (c.context.contains(token) && c.context[token].is_string() &&
            !c.context[token].get<std::string>().empty()) {
            markers.push_back(c.context[token].get<std::string>());
        }
    }
    ggufd::jinja::Rendered r;
    try {
        r = t.render(c.context, options);
    } catch (const TemplateError& e) {
        FAIL() << "render failed: " << e.what();
    }
    ASSERT_EQ(r.text, c.expected);
    for (size_t i = 0; i < r.content_ranges.size(); ++i) {
        const auto [b, e] = r.content_ranges[i];
        ASSERT_TRUE(b < e && e <= r.text.size());
        if (i > 0) {
            ASSERT_GT(b, r.content_ranges[i - 1].second);
        }
        // Copied bytes are part of one client string; a range computed from client data
        // (tojson, upper, repr) must at least hold none of the template's own markers.
        const std::string bytes = r.text.substr(b, e - b);
        if (any_contains(client, bytes)) continue;
        for (const std::string& marker : markers) {
            EXPECT_TRUE(bytes.find(marker) == std::string::npos || any_contains(client, marker))
                << "content range " << b << "-" << e << " holds the template's " << marker;
        }
    }
    if (!c.context.contains("messages")) return;
    for (const auto& m : c.context["messages"]) {
        if (!m.is_object() || !m.contains("content") || !m["content"].is_string()) continue;
        const std::string content = m["content"].get<std::string>();
        if (content.empty()) continue;
        bool printed = false, covered = false;
        for (size_t at = r.text.find(content); at != std::string::npos;
             at = r.text.find(content, at + 1)) {
            printed = true;
            covered = covered || inside_ranges(r, at, at + content.size());
        }
        if (printed) {
            EXPECT_TRUE(covered) << "content not covered: " << content;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, ChatTemplateConformance, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& p) { return p.param.name; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ChatTemplateConformance);

// Guards against the parameterized suite silently shrinking to nothing.
TEST(ChatTemplateConformanceData, CasesArePresent) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    EXPECT_GE(all_cases().size(), 300u);
}

}  // namespace
