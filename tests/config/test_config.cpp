#include <gtest/gtest.h>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <unistd.h>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "config/config.h"
#include "config/logging.h"

namespace {

using ggufd::config::Config;
using ggufd::config::ConfigError;
using Env = std::map<std::string, std::string>;

ggufd::config::LoadResult load(std::vector<std::string> args, const Env& env = {}) {
    args.insert(args.begin(), "ggufd");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    return ggufd::config::load(static_cast<int>(argv.size()), argv.data(), env);
}

std::string error_of(std::vector<std::string> args, const Env& env = {}) {
    try {
        load(std::move(args), env);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

class TempFile {
  public:
    explicit TempFile(const std::string& text)
        : path_("/tmp/ggufd-config-" + std::to_string(getpid()) + "-" + std::to_string(counter_++) +
                ".conf") {
        std::ofstream(path_) << text;
    }
    ~TempFile() { std::remove(path_.c_str()); }
    const std::string& path() const { return path_; }

  private:
    static inline int counter_ = 0;
    std::string path_;
};

TEST(Config, Defaults) {
    const Config c = load({}).config;
    EXPECT_EQ(c.host, "127.0.0.1");
    EXPECT_EQ(c.port, 8080);
    EXPECT_EQ(c.threads, 0);
    EXPECT_EQ(c.ctx_size, 0);
    EXPECT_TRUE(c.models.empty());
    EXPECT_EQ(c.log_format, ggufd::config::LogFormat::text);
}

TEST(Config, CommandLineFlags) {
    const Config c =
        load({"--model", "a.gguf", "-m", "chat=/models/x.gguf", "--port", "9000", "--host",
              "0.0.0.0", "-t", "3", "--parallel", "8", "-c", "2048", "--log-format", "json"})
            .config;
    ASSERT_EQ(c.models.size(), 2u);
    EXPECT_EQ(c.models[0], (ggufd::config::ModelSpec{"a", "a.gguf"}));
    EXPECT_EQ(c.models[1], (ggufd::config::ModelSpec{"chat", "/models/x.gguf"}));
    EXPECT_EQ(c.port, 9000);
    EXPECT_EQ(c.host, "0.0.0.0");
    EXPECT_EQ(c.threads, 3);
    EXPECT_EQ(c.parallel, 8);
    EXPECT_EQ(c.ctx_size, 2048);
    EXPECT_EQ(c.log_format, ggufd::config::LogFormat::json);
    EXPECT_FALSE(c.f16_accumulator);
    EXPECT_TRUE(
        load({"--model", "a.gguf", "--attention-accumulator", "f16"}).config.f16_accumulator);
}

TEST(Config, PrecedenceFileEnvironmentFlags) {
    TempFile file(
        "# settings\nport = 7000\nhost = 10.0.0.1\nparallel = 2\nmodel = f=/f.gguf\nmodel = "
        "g=/g.gguf\n");
    const Env env = {{"GGUFD_PORT", "7100"}, {"GGUFD_PARALLEL", "3"}, {"GGUFD_CPU_LIMIT", "avx2"}};
    auto r = load({"--config", file.path(), "--port", "7200"}, env);
    EXPECT_EQ(r.config.port, 7200);         // flag beats environment and file
    EXPECT_EQ(r.config.parallel, 3);        // environment beats file
    EXPECT_EQ(r.config.host, "10.0.0.1");   // file beats default
    ASSERT_EQ(r.config.models.size(), 2u);  // repeated keys in the file
    EXPECT_EQ(r.sources["port"], "--port");
    EXPECT_EQ(r.sources["parallel"], "GGUFD_PARALLEL");
    EXPECT_EQ(r.sources["host"], "config file " + file.path());

    // Models from a higher source replace the file's list rather than merging with it.
    r = load({"--config", file.path()}, {{"GGUFD_MODEL", "a=/a.gguf,b=/b.gguf"}});
    ASSERT_EQ(r.config.models.size(), 2u);
    EXPECT_EQ(r.config.models[0].name, "a");
    EXPECT_EQ(r.config.models[1].path, "/b.gguf");
}

TEST(Config, ConfigFileFromEnvironment) {
    TempFile file("ctx-size = 1024\n");
    EXPECT_EQ(load({}, {{"GGUFD_CONFIG", file.path()}}).config.ctx_size, 1024);
}

TEST(Config, ErrorsNameSettingSourceAndReason) {
    std::string e = error_of({"--port", "70000"});
    EXPECT_NE(e.find("port"), std::string::npos) << e;
    EXPECT_NE(e.find("--port"), std::string::npos) << e;
    EXPECT_NE(e.find("out of range 1..65535"), std::string::npos) << e;

    e = error_of({}, {{"GGUFD_THREADS", "many"}});
    EXPECT_NE(e.find("threads"), std::string::npos) << e;
    EXPECT_NE(e.find("GGUFD_THREADS"), std::string::npos) << e;
    EXPECT_NE(e.find("not an integer"), std::string::npos) << e;

    TempFile bad_key("prot = 80\n");
    e = error_of({"--config", bad_key.path()});
    EXPECT_NE(e.find("prot"), std::string::npos) << e;

    TempFile bad_value("parallel = 0\n");
    e = error_of({"--config", bad_value.path()});
    EXPECT_NE(e.find("parallel"), std::string::npos) << e;
    EXPECT_NE(e.find("config file"), std::string::npos) << e;

    EXPECT_NE(error_of({"--log-format", "xml"}).find("log-format"), std::string::npos);
    EXPECT_NE(error_of({"--attention-accumulator", "f64"}).find("'f64' is not f32 or f16"),
              std::string::npos);
    EXPECT_NE(error_of({"--log-level", "loud"}).find("log-level"), std::string::npos);
    EXPECT_NE(error_of({"--no-such-flag"}).find("no-such-flag"), std::string::npos);
    EXPECT_NE(error_of({"--config", "/nonexistent.conf"}).find("/nonexistent.conf"),
              std::string::npos);
    EXPECT_NE(error_of({"-m", "a=/x.gguf", "-m", "a=/y.gguf"}).find("used twice"),
              std::string::npos);
    EXPECT_NE(error_of({"-m", "=x.gguf"}).find("NAME=PATH"), std::string::npos);
    EXPECT_NE(error_of({"-m", "../etc/passwd=x"}).find("model name"), std::string::npos);
}

TEST(Config, HelpAndVersion) {
    auto r = load({"--help"});
    EXPECT_TRUE(r.exit_now);
    EXPECT_NE(r.message.find("--ctx-size"), std::string::npos);
    r = load({"--version"});
    EXPECT_TRUE(r.exit_now);
    EXPECT_NE(r.message.find("ggufd"), std::string::npos);
}

TEST(Logging, JsonFormatIsOneObjectPerLine) {
    std::ostringstream out;
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
    sink->set_formatter(ggufd::config::make_formatter(ggufd::config::LogFormat::json));
    spdlog::logger logger("test", sink);
    logger.info("model \"{}\" loaded\nin {} ms", "a", 12);
    logger.warn("second");
    std::istringstream lines(out.str());
    std::string line;
    std::vector<nlohmann::json> parsed;
    while (std::getline(lines, line)) parsed.push_back(nlohmann::json::parse(line));
    ASSERT_EQ(parsed.size(), 2u);
    EXPECT_EQ(parsed[0]["message"], "model \"a\" loaded\nin 12 ms");
    EXPECT_EQ(parsed[0]["level"], "info");
    EXPECT_EQ(parsed[1]["level"], "warning");
    EXPECT_EQ(parsed[0]["logger"], "test");
    EXPECT_TRUE(parsed[0]["time"].get<std::string>().ends_with("Z"));
}

TEST(Logging, TextFormatIsHumanReadable) {
    std::ostringstream out;
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
    sink->set_formatter(ggufd::config::make_formatter(ggufd::config::LogFormat::text));
    spdlog::logger logger("test", sink);
    logger.info("hello {}", 1);
    EXPECT_NE(out.str().find("info  hello 1"), std::string::npos) << out.str();
    EXPECT_EQ(out.str().front(), '2');  // starts with the date
}

TEST(Logging, RecordFieldsAreJsonKeysOrKeyValueText) {
    nlohmann::ordered_json fields;
    fields["request_id"] = "00ff";
    fields["status"] = 200;
    fields["ttft_ms"] = 12.5;
    fields["model"] = nullptr;
    fields["level"] = "spoofed";  // may not replace the record's own keys
    fields["note"] = "client went \"away\"\n";

    std::ostringstream json_out;
    auto json_sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(json_out);
    json_sink->set_formatter(ggufd::config::make_formatter(ggufd::config::LogFormat::json));
    spdlog::logger json_logger("test", json_sink);
    ggufd::config::log_record(json_logger, spdlog::level::info, "access", fields);
    json_logger.info("plain");  // the next message is not a record
    std::istringstream lines(json_out.str());
    std::string line;
    std::vector<nlohmann::json> parsed;
    while (std::getline(lines, line)) parsed.push_back(nlohmann::json::parse(line));
    ASSERT_EQ(parsed.size(), 2u) << json_out.str();
    EXPECT_EQ(parsed[0]["message"], "access");
    EXPECT_EQ(parsed[0]["level"], "info");
    EXPECT_EQ(parsed[0]["request_id"], "00ff");
    EXPECT_EQ(parsed[0]["status"], 200);
    EXPECT_DOUBLE_EQ(parsed[0]["ttft_ms"].get<double>(), 12.5);
    EXPECT_TRUE(parsed[0]["model"].is_null());
    EXPECT_EQ(parsed[0]["note"], "client went \"away\"\n");
    EXPECT_EQ(parsed[1]["message"], "plain");
    EXPECT_FALSE(parsed[1].contains("status"));

    std::ostringstream text_out;
    auto text_sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text_out);
    text_sink->set_formatter(ggufd::config::make_formatter(ggufd::config::LogFormat::text));
    spdlog::logger text_logger("test", text_sink);
    ggufd::config::log_record(text_logger, spdlog::level::info, "access", fields);
    EXPECT_NE(text_out.str().find("access request_id=00ff status=200 ttft_ms=12.5 model=- "),
              std::string::npos)
        << text_out.str();

    // Below the logger's level nothing is formatted or written.
    text_logger.set_level(spdlog::level::warn);
    text_out.str("");
    ggufd::config::log_record(text_logger, spdlog::level::info, "access", fields);
    EXPECT_EQ(text_out.str(), "");
}

TEST(Logging, SetupRejectsUnknownLevelAndCanBeRepeated) {
    EXPECT_THROW(ggufd::config::setup_logging(ggufd::config::LogFormat::text, "loud"), ConfigError);
    ggufd::config::setup_logging(ggufd::config::LogFormat::json, "warn");
    ggufd::config::setup_logging(ggufd::config::LogFormat::text, "debug");
    EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::debug);
}

}  // namespace

namespace {

TEST(Config, ApiKeysFromFlagListAndFile) {
    EXPECT_TRUE(load({}).config.api_keys.empty());
    EXPECT_EQ(load({"--api-key", "sk-a,sk-b"}).config.api_keys,
              (std::vector<std::string>{"sk-a", "sk-b"}));
    TempFile keys("# team keys\n  sk-file-1  \n\nsk-file-2\r\n");
    EXPECT_EQ(load({"--api-key", "sk-a", "--api-key-file", keys.path()}).config.api_keys,
              (std::vector<std::string>{"sk-a", "sk-file-1", "sk-file-2"}));
    EXPECT_EQ(load({}, {{"GGUFD_API_KEY_FILE", keys.path()}}).config.api_keys.size(), 2u);
}

TEST(Config, ApiKeyFileErrorsNameTheSettingButNeverAKey) {
    const std::string missing = error_of({"--api-key-file", "/nonexistent/keys"});
    EXPECT_NE(missing.find("api-key-file"), std::string::npos) << missing;
    EXPECT_NE(missing.find("/nonexistent/keys"), std::string::npos) << missing;
    TempFile empty("# nothing here\n\n");
    const std::string none = error_of({"--api-key-file", empty.path()});
    EXPECT_NE(none.find("holds no key"), std::string::npos) << none;
    // A bad neighbouring setting's message does not echo the keys.
    const std::string other = error_of({"--api-key", "sk-secret", "--port", "x"});
    EXPECT_EQ(other.find("sk-secret"), std::string::npos) << other;
}

TEST(Config, MetricsPublicAndIoThreads) {
    EXPECT_FALSE(load({}).config.metrics_public);
    EXPECT_TRUE(load({"--metrics-public", "true"}).config.metrics_public);
    EXPECT_FALSE(load({}, {{"GGUFD_METRICS_PUBLIC", "off"}}).config.metrics_public);
    EXPECT_NE(error_of({"--metrics-public", "maybe"}).find("metrics-public"), std::string::npos);
    EXPECT_EQ(load({}).config.io_threads, 2);
    EXPECT_EQ(load({"--io-threads", "4"}).config.io_threads, 4);
    EXPECT_NE(error_of({"--io-threads", "0"}).find("io-threads"), std::string::npos);
}

TEST(Config, NoWebui) {
    EXPECT_TRUE(load({}).config.webui);
    // A bare flag, as llama-server's; a value, the environment and the file as every setting.
    EXPECT_FALSE(load({"--no-webui"}).config.webui);
    EXPECT_FALSE(load({"--no-webui", "--port", "9000"}).config.webui);
    EXPECT_TRUE(load({"--no-webui=false"}).config.webui);
    EXPECT_FALSE(load({}, {{"GGUFD_NO_WEBUI", "true"}}).config.webui);
    EXPECT_TRUE(load({}, {{"GGUFD_NO_WEBUI", "0"}}).config.webui);
    TempFile file("no-webui = yes\n");
    EXPECT_FALSE(load({"--config", file.path()}).config.webui);
    EXPECT_NE(error_of({"--no-webui=maybe"}).find("invalid no-webui (from --no-webui)"),
              std::string::npos);
}

TEST(Config, StrictRequests) {
    EXPECT_FALSE(load({}).config.strict_requests);
    EXPECT_TRUE(load({"--strict-requests"}).config.strict_requests);
    EXPECT_TRUE(load({"--strict-requests", "--port", "9000"}).config.strict_requests);
    EXPECT_FALSE(load({"--strict-requests=false"}).config.strict_requests);
    EXPECT_TRUE(load({}, {{"GGUFD_STRICT_REQUESTS", "true"}}).config.strict_requests);
    EXPECT_FALSE(load({}, {{"GGUFD_STRICT_REQUESTS", "0"}}).config.strict_requests);
    TempFile file("strict-requests = yes\n");
    EXPECT_TRUE(load({"--config", file.path()}).config.strict_requests);
    EXPECT_NE(error_of({"--strict-requests=maybe"}).find("strict-requests"), std::string::npos);
}

TEST(Config, ThreadsBatch) {
    EXPECT_EQ(load({}).config.threads_batch, 0);  // 0: as --threads
    EXPECT_EQ(load({"--threads-batch", "8", "-t", "2"}).config.threads_batch, 8);
    EXPECT_EQ(load({}, {{"GGUFD_THREADS_BATCH", "6"}}).config.threads_batch, 6);
    EXPECT_NE(error_of({"--threads-batch", "-1"}).find("threads-batch"), std::string::npos);
    EXPECT_NE(error_of({"--threads-batch", "many"}).find("threads-batch"), std::string::npos);
}

TEST(Config, TimeoutsCorsAndSkipBadModels) {
    Config d = load({}).config;
    EXPECT_EQ(d.idle_timeout_s, 60);
    EXPECT_EQ(d.header_timeout_s, 10);
    EXPECT_EQ(d.cors_origin, "");
    EXPECT_FALSE(d.skip_bad_models);
    Config c = load({"--idle-timeout", "3", "--cors-origin", "https://app.test"},
                    {{"GGUFD_HEADER_TIMEOUT", "2"}, {"GGUFD_SKIP_BAD_MODELS", "true"}})
                   .config;
    EXPECT_EQ(c.idle_timeout_s, 3);
    EXPECT_EQ(c.header_timeout_s, 2);
    EXPECT_EQ(c.cors_origin, "https://app.test");
    EXPECT_TRUE(c.skip_bad_models);
    EXPECT_EQ(load({"--cors-origin", "*"}).config.cors_origin, "*");
    EXPECT_NE(error_of({"--header-timeout", "0"}).find("header-timeout"), std::string::npos);
    // One origin only: a list (or anything with spaces or control bytes) would be sent to
    // browsers as one invalid header value.
    for (const char* bad : {"https://a.test,https://b.test", "https://a.test b", "x\ry"}) {
        std::string e = error_of({"--cors-origin", bad});
        EXPECT_NE(e.find("invalid cors-origin (from --cors-origin)"), std::string::npos) << bad;
    }
}

}  // namespace

namespace {

TEST(Config, ModelsFolderIdleUnloadMemoryBudgetAndLoadTimeout) {
    Config d = load({}).config;
    EXPECT_EQ(d.models_dir, "");
    EXPECT_EQ(d.idle_unload_s, 300);
    EXPECT_EQ(d.memory_budget, 0u);
    EXPECT_EQ(d.load_timeout_s, 120);
    TempFile file("memory-budget = 512M\n");
    Config c = load({"--models-dir", "/srv/models", "--config", file.path()},
                    {{"GGUFD_IDLE_UNLOAD", "0"}, {"GGUFD_LOAD_TIMEOUT", "30"}})
                   .config;
    EXPECT_EQ(c.models_dir, "/srv/models");
    EXPECT_EQ(c.idle_unload_s, 0);
    EXPECT_EQ(c.memory_budget, 512ull << 20);
    EXPECT_EQ(c.load_timeout_s, 30);
    EXPECT_EQ(load({"--memory-budget", "1000"}).config.memory_budget, 1000u);
    EXPECT_EQ(load({"--memory-budget", "3G"}).config.memory_budget, 3ull << 30);
    EXPECT_EQ(load({"--memory-budget", "16GiB"}).config.memory_budget, 16ull << 30);
    EXPECT_EQ(load({"--memory-budget", "64kb"}).config.memory_budget, 64ull << 10);
    for (const char* bad : {"lots", "5Q", "-1", "1.5G", "99999999999T", ""}) {
        const std::string e = error_of({"--memory-budget", bad});
        EXPECT_NE(e.find("invalid memory-budget (from --memory-budget)"), std::string::npos)
            << bad << ": " << e;
    }
    EXPECT_NE(error_of({"--idle-unload", "-5"}).find("idle-unload"), std::string::npos);
    EXPECT_NE(error_of({"--load-timeout", "0"}).find("load-timeout"), std::string::npos);
}

TEST(Config, QueueSize) {
    EXPECT_EQ(load({}).config.queue_size, 64);
    EXPECT_EQ(load({"--queue-size", "0"}).config.queue_size, 0);
    EXPECT_EQ(load({}, {{"GGUFD_QUEUE_SIZE", "500"}}).config.queue_size, 500);
    EXPECT_NE(error_of({"--queue-size", "-1"}).find("queue-size"), std::string::npos);
}

TEST(Config, ChatTemplateFilesForEveryModelOrOne) {
    TempFile every("{{ 'every' }}");
    TempFile one("{{ 'one' }}");
    const Config c =
        load({"--model", "a=/x/a.gguf", "--model", "b=/x/b.gguf", "--chat-template-file",
              every.path(), "--chat-template-file", "b=" + one.path()})
            .config;
    EXPECT_EQ(c.chat_templates,
              (std::map<std::string, std::string>{{"", "{{ 'every' }}"}, {"b", "{{ 'one' }}"}}));
    // The environment takes a comma-separated list, like GGUFD_MODEL.
    EXPECT_EQ(load({"--model", "b=/x/b.gguf"}, {{"GGUFD_CHAT_TEMPLATE_FILE", "b=" + one.path()}})
                  .config.chat_templates.at("b"),
              "{{ 'one' }}");
}

TEST(Config, ToolParsersForEveryModelOrOne) {
    const Config c = load({"--model", "a=/x/a.gguf", "--model", "b=/x/b.gguf", "--tool-parser",
                           "hermes", "--tool-parser", "b=mistral"})
                         .config;
    EXPECT_EQ(c.tool_parsers,
              (std::map<std::string, std::string>{{"", "hermes"}, {"b", "mistral"}}));
    EXPECT_EQ(load({"--model", "b=/x/b.gguf"}, {{"GGUFD_TOOL_PARSER", "b=llama3"}})
                  .config.tool_parsers.at("b"),
              "llama3");
    const std::string unknown = error_of({"--model", "a=/x/a.gguf", "--tool-parser", "zz=hermes"});
    EXPECT_NE(unknown.find("tool-parser"), std::string::npos) << unknown;
    EXPECT_NE(unknown.find("no model is named 'zz'"), std::string::npos) << unknown;
    const std::string empty = error_of({"--tool-parser", "a="});
    EXPECT_NE(empty.find("has no value"), std::string::npos) << empty;
}

TEST(Config, ProjectorsForTheOnlyModelOrByName) {
    EXPECT_EQ(load({"--model", "a=/x/a.gguf", "--mmproj", "/x/mmproj-a.gguf"}).config.mmprojs,
              (std::map<std::string, std::string>{{"", "/x/mmproj-a.gguf"}}));
    EXPECT_EQ(
        load({"--model", "a=/x/a.gguf", "--model", "b=/x/b.gguf", "--mmproj", "b=/x/mmproj-b.gguf"})
            .config.mmprojs,
        (std::map<std::string, std::string>{{"b", "/x/mmproj-b.gguf"}}));
    // Unnamed among several models: which one?
    const std::string which =
        error_of({"--model", "a=/x/a.gguf", "--model", "b=/x/b.gguf", "--mmproj", "/x/m.gguf"});
    EXPECT_NE(which.find("say which as NAME=PATH"), std::string::npos) << which;
    const std::string unknown = error_of({"--model", "a=/x/a.gguf", "--mmproj", "zz=/x/m.gguf"});
    EXPECT_NE(unknown.find("no model is named 'zz'"), std::string::npos) << unknown;
    // A models folder's model may be named before it is listed.
    EXPECT_EQ(load({"--models-dir", "/tmp", "--mmproj", "zz=/x/m.gguf"}).config.mmprojs.at("zz"),
              "/x/m.gguf");
}

TEST(Config, SpeculativeSettings) {
    const Config c = load({"--model", "a=/x/a.gguf", "--spec-type", "a=ngram", "--draft-max", "8",
                           "--draft-min", "2", "--spec-ngram-size-n", "4"})
                         .config;
    EXPECT_EQ(c.spec_types, (std::map<std::string, std::string>{{"a", "ngram"}}));
    EXPECT_EQ(c.draft_max, 8);
    EXPECT_EQ(c.draft_min, 2);
    EXPECT_EQ(c.spec_ngram_size_n, 4);
    EXPECT_NE(error_of({"--spec-type", "eagle"}).find("not none, ngram or draft"),
              std::string::npos);
    EXPECT_NE(error_of({"--draft-max", "4", "--draft-min", "5"}).find("draft-min"),
              std::string::npos);
    EXPECT_NE(error_of({"--draft-max", "65"}).find("draft-max"), std::string::npos);
}

TEST(Config, DraftModelsForEveryModelOrOne) {
    const Config c =
        load({"--model", "a=/x/a.gguf", "--model", "b=/x/b.gguf", "--model-draft", "/x/small.gguf",
              "--model-draft", "b=/x/tiny.gguf", "--draft-p-min", "0.5", "--spec-type", "a=draft"})
            .config;
    EXPECT_EQ(c.model_drafts,
              (std::map<std::string, std::string>{{"", "/x/small.gguf"}, {"b", "/x/tiny.gguf"}}));
    EXPECT_FLOAT_EQ(c.draft_p_min, 0.5f);
    const std::string unknown =
        error_of({"--model", "a=/x/a.gguf", "--model-draft", "z=/x/t.gguf"});
    EXPECT_NE(unknown.find("no model is named 'z'"), std::string::npos) << unknown;
    // A name of the models folder is known only when the folder is read.
    EXPECT_EQ(
        load({"--models-dir", "/x", "--model-draft", "z=/x/t.gguf"}).config.model_drafts.at("z"),
        "/x/t.gguf");
    EXPECT_NE(error_of({"--draft-p-min", "1.5"}).find("draft-p-min"), std::string::npos);
}

TEST(Config, PoolingsForEveryModelOrOne) {
    const Config c = load({"--model", "a=/x/a.gguf", "--model", "b=/x/b.gguf", "--pooling", "mean",
                           "--pooling", "b=rank"})
                         .config;
    EXPECT_EQ(c.poolings, (std::map<std::string, std::string>{{"", "mean"}, {"b", "rank"}}));
    EXPECT_EQ(
        load({"--model", "b=/x/b.gguf"}, {{"GGUFD_POOLING", "b=cls"}}).config.poolings.at("b"),
        "cls");
    const std::string unknown = error_of({"--model", "a=/x/a.gguf", "--pooling", "zz=mean"});
    EXPECT_NE(unknown.find("pooling"), std::string::npos) << unknown;
    EXPECT_NE(unknown.find("no model is named 'zz'"), std::string::npos) << unknown;
    const std::string twice = error_of({"--pooling", "mean", "--pooling", "last"});
    EXPECT_NE(twice.find("two poolings for every model"), std::string::npos) << twice;
}

TEST(Config, LoraAdaptersForTheOnlyModelOrANamedOne) {
    using ggufd::config::LoraSpec;
    const Config one = load({"--model", "m=/x/m.gguf", "--lora", "sql=/x/sql.gguf", "--lora",
                             "chat=/x/c.gguf", "--lora-scale", "chat=0.5"})
                           .config;
    EXPECT_EQ(one.loras, (std::vector<LoraSpec>{{"", "sql", "/x/sql.gguf", 0.0f},
                                                {"", "chat", "/x/c.gguf", 0.5f}}));
    // The environment and config files take comma-separated lists, as for models.
    const Config env =
        load({"--model", "a=/x/a.gguf", "--model", "b=/x/b.gguf"},
             {{"GGUFD_LORA", "a/s=/x/s.gguf,b/s=/x/t.gguf"}, {"GGUFD_LORA_SCALE", "b/s=-1.5"}})
            .config;
    EXPECT_EQ(env.loras, (std::vector<LoraSpec>{{"a", "s", "/x/s.gguf", 0.0f},
                                                {"b", "s", "/x/t.gguf", -1.5f}}));
    auto expect_error = [](std::vector<std::string> args, const std::string& part) {
        const std::string e = error_of(std::move(args));
        EXPECT_NE(e.find(part), std::string::npos) << e;
    };
    expect_error({"--lora", "s=/x/s.gguf"}, "needs a model");
    expect_error({"--model", "a=/x/a.gguf", "--model", "b=/x/b.gguf", "--lora", "s=/x/s.gguf"},
                 "say which as MODEL/s=PATH");
    expect_error({"--model", "a=/x/a.gguf", "--lora", "z/s=/x/s.gguf"}, "no model is named 'z'");
    expect_error({"--model", "a=/x/a.gguf", "--lora", "s=/x/s.gguf", "--lora", "a/s=/x/t.gguf"},
                 "two adapters named 's'");
    expect_error({"--model", "a=/x/a.gguf", "--lora", "/x/s.gguf"}, "expected [MODEL/]NAME=PATH");
    expect_error({"--model", "a=/x/a.gguf", "--lora", "s t=/x/s.gguf"}, "letters, digits");
    expect_error({"--model", "a=/x/a.gguf", "--lora", "s=/x/s.gguf", "--lora-scale", "t=1"},
                 "no adapter 't'");
    expect_error({"--model", "a=/x/a.gguf", "--lora", "s=/x/s.gguf", "--lora-scale", "s=lots"},
                 "'lots' is not a number");
    expect_error({"--model", "a=/x/a.gguf", "--lora", "s=/x/s.gguf", "--lora-scale", "s=1e9"},
                 "between -100 and 100");
}

TEST(Config, ChatTemplateFileErrorsNameTheSetting) {
    const std::string missing = error_of({"--chat-template-file", "/nonexistent/t.jinja"});
    EXPECT_NE(missing.find("chat-template-file"), std::string::npos) << missing;
    EXPECT_NE(missing.find("/nonexistent/t.jinja"), std::string::npos) << missing;
    TempFile t("x");
    const std::string unknown =
        error_of({"--model", "a=/x/a.gguf", "--chat-template-file", "zz=" + t.path()});
    EXPECT_NE(unknown.find("no model is named 'zz'"), std::string::npos) << unknown;
    const std::string twice =
        error_of({"--chat-template-file", t.path(), "--chat-template-file", t.path()});
    EXPECT_NE(twice.find("two templates"), std::string::npos) << twice;
}

TEST(Config, CacheTypesFromFlagsEnvironmentAndFile) {
    const Config d = load({}).config;
    EXPECT_EQ(d.cache_type_k, "f16");
    EXPECT_EQ(d.cache_type_v, "f16");
    const Config c = load({"--cache-type-k", "q8_0", "--cache-type-v", "q4_0"}).config;
    EXPECT_EQ(c.cache_type_k, "q8_0");
    EXPECT_EQ(c.cache_type_v, "q4_0");
    EXPECT_EQ(load({}, {{"GGUFD_CACHE_TYPE_V", "q8_0"}}).config.cache_type_v, "q8_0");
    TempFile file("cache-type-k = q4_0\n");
    const auto r = load({"--config", file.path()});
    EXPECT_EQ(r.config.cache_type_k, "q4_0");
    EXPECT_EQ(r.config.cache_type_v, "f16");
    const std::string e = error_of({}, {{"GGUFD_CACHE_TYPE_K", "q5_1"}});
    EXPECT_NE(e.find("cache-type-k"), std::string::npos) << e;
    EXPECT_NE(e.find("GGUFD_CACHE_TYPE_K"), std::string::npos) << e;
    EXPECT_NE(e.find("'q5_1' is not f16, q8_0 or q4_0"), std::string::npos) << e;
}

TEST(Config, PrefixCacheSettingsFromFlagsEnvironmentAndFile) {
    const Config d = load({}).config;
    EXPECT_EQ(d.cache_ram_mib, ggufd::config::defaults::kCacheRamMiB);
    EXPECT_EQ(d.checkpoint_interval, ggufd::config::defaults::kCheckpointInterval);
    EXPECT_EQ(d.cache_dir, "");
    const Config c = load({"--cache-ram", "0", "--checkpoint-interval", "512"}).config;
    EXPECT_EQ(c.cache_ram_mib, 0);
    EXPECT_EQ(c.checkpoint_interval, 512);
    EXPECT_EQ(load({}, {{"GGUFD_CACHE_DIR", "/var/cache/ggufd"}}).config.cache_dir,
              "/var/cache/ggufd");
    TempFile file("cache-ram = 256\n");
    EXPECT_EQ(load({"--config", file.path()}).config.cache_ram_mib, 256);
    const std::string e = error_of({"--cache-ram", "-1"});
    EXPECT_NE(e.find("cache-ram"), std::string::npos) << e;
}

}  // namespace
