// The chat page's routes on the real server (webui_routes.cpp): / negotiated between the page and
// Ollama's "Ollama is running", the embedded files with their types and ETags, no key needed for
// them, --no-webui, HEAD. The page itself is tested in a browser by tests/webui.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server/server.h"
#include "tests/server/fake_model.h"
#include "tests/server/http_client.h"
#include "webui/webui.h"

namespace ggufd::server {
namespace {

using testing::Client;
using testing::FakeBackend;
using Response = testing::Response;
namespace http = testing::http;

const testing::Headers browser = {
    {"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}};

class WebuiTest : public ::testing::Test {
  protected:
    void start(ServerOptions options = {}) {
        options.host = "127.0.0.1";
        options.port = 0;
        options.io_threads = 1;
        registry.add(std::make_shared<FakeBackend>("fake"));
        server = std::make_unique<Server>(registry, std::move(options));
        server->start();
        port = server->port();
    }

    ModelRegistry registry;
    std::unique_ptr<Server> server;
    uint16_t port = 0;
};

TEST(WebuiFiles, EmbeddedBytesAreTheSourceFiles) {
    // The tests run from the repository root.
    ASSERT_GE(webui::files().size(), 3u);
    for (const webui::File& f : webui::files()) {
        std::ifstream in("webui/" + std::string(f.name), std::ios::binary);
        ASSERT_TRUE(in) << f.name;
        std::ostringstream text;
        text << in.rdbuf();
        EXPECT_EQ(text.str(), f.body) << f.name;
        EXPECT_EQ(f.etag.size(), 22u) << f.etag;
        EXPECT_EQ(webui::find(f.name), &f);
    }
    EXPECT_EQ(webui::find("index.html")->content_type, "text/html; charset=utf-8");
    EXPECT_EQ(webui::find("app.js")->content_type, "text/javascript; charset=utf-8");
    EXPECT_EQ(webui::find("style.css")->content_type, "text/css; charset=utf-8");
    EXPECT_EQ(webui::find("missing.js"), nullptr);
}

TEST(WebuiFiles, EveryUrlIsRelativeSoAPathPrefixWorks) {
    // Behind a proxy at /prefix/, "/v1/models" would leave the prefix; "v1/models" keeps it.
    for (const webui::File& f : webui::files()) {
        for (const char* absolute : {"\"/", "'/", "`/", "url(/"}) {
            EXPECT_EQ(f.body.find(absolute), std::string_view::npos)
                << f.name << " has an absolute URL (" << absolute << ")";
        }
    }
}

TEST_F(WebuiTest, BrowsersGetThePageOtherClientsOllamaIsRunning) {
    start();
    Client c(port);
    Response r = c.get("/", browser);
    EXPECT_EQ(r.result_int(), 200);
    EXPECT_EQ(r[http::field::content_type], "text/html; charset=utf-8");
    EXPECT_EQ(r.body(), webui::find("index.html")->body);
    EXPECT_EQ(r[http::field::vary], "Accept");
    EXPECT_EQ(r[http::field::cache_control], "no-cache");
    EXPECT_NE(r["Content-Security-Policy"].find("default-src 'self'"), std::string::npos);
    // Ollama's clients (and curl) ask with */* or nothing.
    for (const testing::Headers& h : {testing::Headers{}, testing::Headers{{"Accept", "*/*"}}}) {
        r = c.get("/", h);
        EXPECT_EQ(r.result_int(), 200);
        EXPECT_EQ(r[http::field::content_type], "text/plain; charset=utf-8");
        EXPECT_EQ(r.body(), "Ollama is running");
        EXPECT_EQ(r[http::field::vary], "Accept");
    }
}

TEST_F(WebuiTest, FilesHaveTheirTypesAndRevalidateByETag) {
    start();
    Client c(port);
    for (const webui::File& f : webui::files()) {
        const std::string target = "/webui/" + std::string(f.name);
        Response r = c.get(target);
        EXPECT_EQ(r.result_int(), 200) << target;
        EXPECT_EQ(r[http::field::content_type], f.content_type);
        EXPECT_EQ(r[http::field::etag], f.etag);
        EXPECT_EQ(r[http::field::cache_control], "no-cache");
        EXPECT_EQ(r["X-Content-Type-Options"], "nosniff");
        EXPECT_EQ(r.body(), f.body);

        const std::string etag(f.etag);
        for (const std::string& current :
             {etag, "W/" + etag, "\"old\", " + etag, std::string("*")}) {
            r = c.get(target, {{"If-None-Match", current}});
            EXPECT_EQ(r.result_int(), 304) << current;
            EXPECT_TRUE(r.body().empty());
            EXPECT_EQ(r[http::field::etag], f.etag);
        }
        r = c.get(target, {{"If-None-Match", "\"old\""}});
        EXPECT_EQ(r.result_int(), 200);
        EXPECT_EQ(r.body(), f.body);
    }
    EXPECT_EQ(c.get("/webui/missing.js").result_int(), 404);
    EXPECT_EQ(c.get("/webui/").result_int(), 404);
    EXPECT_EQ(c.get("/webui/../config.h").result_int(), 404);
}

TEST_F(WebuiTest, ThePageNeedsNoKeyItsApiCallsDo) {
    ServerOptions o;
    o.api.api_keys = {"sk-page"};
    start(o);
    Client c(port);
    EXPECT_EQ(c.get("/", browser).result_int(), 200);
    EXPECT_EQ(c.get("/").body(), "Ollama is running");
    EXPECT_EQ(c.get("/webui/app.js").result_int(), 200);
    EXPECT_EQ(c.get("/v1/models").result_int(), 401);
    EXPECT_EQ(c.get("/v1/models", {{"Authorization", "Bearer sk-page"}}).result_int(), 200);
}

TEST_F(WebuiTest, NoWebuiLeavesOnlyOllamaIsRunning) {
    ServerOptions o;
    o.api.webui = false;
    start(o);
    Client c(port);
    Response r = c.get("/", browser);
    EXPECT_EQ(r.result_int(), 200);
    EXPECT_EQ(r[http::field::content_type], "text/plain; charset=utf-8");
    EXPECT_EQ(r.body(), "Ollama is running");
    EXPECT_EQ(r.count(http::field::vary), 0u);
    EXPECT_EQ(c.get("/webui/app.js").result_int(), 404);
    EXPECT_EQ(c.get("/webui/index.html").result_int(), 404);
}

TEST_F(WebuiTest, HeadIsTheHeadOfGetWithoutItsBody) {
    // The ollama CLI's heartbeat is HEAD /.
    start();
    Client c(port);
    c.send(http::verb::head, "/");
    const std::string head = c.read_until("\r\n\r\n");
    EXPECT_TRUE(head.starts_with("HTTP/1.1 200 OK\r\n")) << head;
    EXPECT_NE(head.find("Content-Length: 17\r\n"), std::string::npos) << head;
    EXPECT_TRUE(head.ends_with("\r\n\r\n")) << "a body followed the head: " << head;
    // The connection goes on with the next request: no body was left in it.
    Response r = c.get("/");
    EXPECT_EQ(r.result_int(), 200);
    EXPECT_EQ(r.body(), "Ollama is running");
    c.send(http::verb::head, "/webui/style.css");
    const std::string file_head = c.read_until("\r\n\r\n");
    EXPECT_NE(file_head.find("Content-Type: text/css; charset=utf-8\r\n"), std::string::npos);
    EXPECT_TRUE(file_head.ends_with("\r\n\r\n")) << file_head;
    EXPECT_EQ(c.get("/health").result_int(), 200);
}

}  // namespace
}  // namespace ggufd::server
