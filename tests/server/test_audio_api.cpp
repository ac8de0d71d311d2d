// Speech to text over HTTP: the multipart parser and its refusals, the form's fields, and
// /v1/audio/transcriptions served by the real server with the conformance folder's Whisper
// model, whose greedy text must be whisper.cpp's (shared/conformance/whisper).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "server/api_error.h"
#include "server/audio_request.h"
#include "server/multipart.h"
#include "server/server.h"
#include "server/whisper_backend.h"
#include "tests/server/http_client.h"
#include "tests/support/conformance.h"

namespace ggufd::server {
namespace {

using testing::Client;

std::string part(const std::string& name, const std::string& value, const std::string& extra = {}) {
    return "--XyZ\r\nContent-Disposition: form-data; name=\"" + name + "\"" + extra + "\r\n\r\n" +
           value + "\r\n";
}

TEST(Multipart, ParsesPartsWithNamesFilenamesAndTypes) {
    EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=XyZ"), "XyZ");
    EXPECT_EQ(multipart_boundary("Multipart/Form-Data;boundary=\"a b\"; charset=x"), "a b");
    const std::string body =
        "preamble\r\n" + part("model", "m1") +
        "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; "
        "filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\nRIFF\r\n--x\r\n" +
        part("empty", "") + "--XyZ--\r\n";
    const auto parts = parse_multipart(body, "XyZ");
    ASSERT_EQ(parts.size(), 3u);
    EXPECT_EQ(parts[0].name, "model");
    EXPECT_EQ(parts[0].data, "m1");
    EXPECT_FALSE(parts[0].filename);
    EXPECT_EQ(parts[1].name, "file");
    EXPECT_EQ(parts[1].filename.value_or(""), "a.wav");
    EXPECT_EQ(parts[1].content_type, "audio/wav");
    EXPECT_EQ(parts[1].data, "RIFF\r\n--x");  // a near-boundary inside the data stays data
    EXPECT_EQ(parts[2].data, "");
}

TEST(Multipart, RefusesMalformedBodiesWithAReason) {
    auto why = [](const std::string& ct, const std::string& body, MultipartLimits lim = {}) {
        try {
            parse_multipart(body, multipart_boundary(ct), lim);
        } catch (const MultipartError& e) {
            return std::string(e.what());
        }
        return std::string("parsed");
    };
    const std::string ct = "multipart/form-data; boundary=XyZ";
    EXPECT_NE(why("application/json", "{}").find("must be multipart/form-data"), std::string::npos);
    EXPECT_NE(why("multipart/form-data", "").find("needs a boundary"), std::string::npos);
    EXPECT_NE(why(ct, "no parts").find("no part"), std::string::npos);
    EXPECT_NE(why(ct, part("a", "1")).find("ends inside a part"), std::string::npos);
    EXPECT_NE(why(ct, "--XyZ\r\nX: y\r\n\r\n1\r\n--XyZ--").find("no Content-Disposition"),
              std::string::npos);
    EXPECT_NE(
        why(ct, "--XyZ\r\nContent-Disposition: form-data\r\n\r\n1\r\n--XyZ--").find("has no name"),
        std::string::npos);
    EXPECT_NE(why(ct, "--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\n1\r\n--XyZ--")
                  .find("unterminated"),
              std::string::npos);
    EXPECT_NE(why(ct, part("a", "1") + part("b", "2") + "--XyZ--", {.max_parts = 1})
                  .find("more than 1 parts"),
              std::string::npos);
    EXPECT_NE(why(ct,
                  "--XyZ\r\nContent-Disposition: form-data; name=\"a\"; x=\"" +
                      std::string(200, 'a') + "\"\r\n\r\n1\r\n--XyZ--",
                  {.max_header_bytes = 100})
                  .find("exceed 100 bytes"),
              std::string::npos);
    EXPECT_NE(why(ct, "--XyZjunk").find("CRLF"), std::string::npos);
    EXPECT_EQ(why(ct, part("a", "1") + "--XyZ--"), "parsed");
}

TEST(TranscriptionForm, ReadsEachFieldAndNamesTheOneAtFault) {
    const std::string ct = "multipart/form-data; boundary=XyZ";
    const std::string file = part("file", "RIFF....", "; filename=\"a.wav\"");
    const TranscriptionForm f = parse_transcription_form(
        ct,
        file + part("model", "w") + part("language", "de") + part("prompt", "Hi") +
            part("response_format", "verbose_json") + part("temperature", "0.4") +
            part("timestamp_granularities[]", "segment") + part("stream", "false") + "--XyZ--",
        false);
    EXPECT_EQ(f.file, "RIFF....");
    EXPECT_EQ(f.filename, "a.wav");
    EXPECT_EQ(f.model, "w");
    EXPECT_EQ(f.language.value_or(""), "de");
    EXPECT_EQ(f.prompt, "Hi");
    EXPECT_EQ(f.response_format, TranscriptFormat::verbose_json);
    EXPECT_FLOAT_EQ(f.temperature, 0.4f);
    EXPECT_TRUE(f.segment_timestamps);

    auto param = [&](const std::string& body) {
        try {
            parse_transcription_form(ct, body + "--XyZ--", false);
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status(), 400);
            return e.param();
        }
        return std::string("accepted");
    };
    EXPECT_EQ(param(part("model", "w")), "file");
    EXPECT_EQ(param(part("file", "")), "file");
    EXPECT_EQ(param(file + file), "file");
    EXPECT_EQ(param(file + part("temperature", "hot")), "temperature");
    EXPECT_EQ(param(file + part("temperature", "1.5")), "temperature");
    EXPECT_EQ(param(file + part("temperature", "nan")), "temperature");
    EXPECT_EQ(param(file + part("response_format", "xml")), "response_format");
    EXPECT_EQ(param(file + part("language", "klingon")), "language");
    EXPECT_EQ(param(file + part("timestamp_granularities[]", "word")), "timestamp_granularities[]");
    EXPECT_EQ(param(file + part("prompt", std::string(70000, 'a'))), "prompt");
    EXPECT_EQ(param(file), "accepted");
}

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class AudioServing : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = ::ggufd::testing::conformance_dir();
        if (dir_.empty()) {
            if (::ggufd::testing::running_in_ci()) FAIL() << "conformance data missing";
            GTEST_SKIP() << "conformance data not found";
        }
        registry_.add(WhisperBackend::load(dir_ / "whisper" / "tiny-whisper.gguf",
                                           {.name = "whisper", .n_threads = 2}));
        ServerOptions options;
        options.host = "127.0.0.1";
        options.port = 0;
        options.io_threads = 2;
        server_ = std::make_unique<Server>(registry_, std::move(options));
        server_->start();
    }
    void TearDown() override {
        if (server_) server_->stop(std::chrono::milliseconds(2000));
    }

    testing::Response transcribe(const std::string& wav, const std::string& fields,
                                 const std::string& path = "/v1/audio/transcriptions") {
        Client c(server_->port());
        const std::string body =
            part("file", read_file(dir_ / "whisper" / wav), "; filename=\"" + wav + "\"") +
            part("model", "whisper") + fields + "--XyZ--\r\n";
        return c.request(boost::beast::http::verb::post, path, body,
                         {{"Content-Type", "multipart/form-data; boundary=XyZ"}});
    }

    std::filesystem::path dir_;
    ModelRegistry registry_;
    std::unique_ptr<Server> server_;
};

TEST_F(AudioServing, TranscribesAsWhisperCppInEveryFormat) {
    for (const char* name : {"tones", "chirp"}) {
        const auto meta =
            nlohmann::json::parse(read_file(dir_ / "whisper" / (std::string(name) + ".json")));
        const auto r = transcribe(std::string(name) + ".wav", part("language", "en"));
        ASSERT_EQ(r.result_int(), 200) << r.body();
        EXPECT_EQ(nlohmann::json::parse(r.body())["text"], meta["text"]) << name;
        // No language given: detected from the audio.
        EXPECT_EQ(transcribe(std::string(name) + ".wav", "").result_int(), 200);
    }
    const auto text =
        transcribe("tones.wav", part("language", "en") + part("response_format", "text"));
    EXPECT_EQ(text.result_int(), 200);
    EXPECT_EQ(text[boost::beast::http::field::content_type], "text/plain; charset=utf-8");
    EXPECT_FALSE(text.body().empty());
    const auto verbose =
        transcribe("chirp.wav", part("response_format", "verbose_json") + part("language", "en"));
    ASSERT_EQ(verbose.result_int(), 200) << verbose.body();
    const auto v = nlohmann::json::parse(verbose.body());
    EXPECT_EQ(v["task"], "transcribe");
    EXPECT_EQ(v["language"], "en");
    EXPECT_NEAR(v["duration"].get<double>(), 3.0, 1e-9);
    ASSERT_FALSE(v["segments"].empty());
    EXPECT_LE(v["segments"].back()["end"].get<double>(), 3.0 + 1e-9);
    const auto srt = transcribe("chirp.wav", part("response_format", "srt"));
    EXPECT_EQ(srt.body().rfind("1\n00:00:", 0), 0u) << srt.body();
    const auto vtt = transcribe("chirp.wav", part("response_format", "vtt"));
    EXPECT_EQ(vtt.body().rfind("WEBVTT\n\n", 0), 0u) << vtt.body();
    const auto tr =
        transcribe("tones.wav", part("response_format", "verbose_json"), "/v1/audio/translations");
    ASSERT_EQ(tr.result_int(), 200) << tr.body();
    EXPECT_EQ(nlohmann::json::parse(tr.body())["task"], "translate");
}

TEST_F(AudioServing, ListsTheModelAsTranscribingAndRefusesWhatItCannotDo) {
    Client c(server_->port());
    const auto models = nlohmann::json::parse(c.get("/v1/models").body());
    EXPECT_EQ(models["data"][0]["capabilities"], nlohmann::json::array({"transcription"}));
    const auto chat =
        c.post("/v1/chat/completions",
               {{"model", "whisper"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
    EXPECT_EQ(chat.result_int(), 400);
    EXPECT_NE(chat.body().find("transcribes audio"), std::string::npos) << chat.body();

    Client d(server_->port());
    const std::string bad = part("file", "RIFF not really", "; filename=\"x.wav\"") + "--XyZ--";
    const auto r = d.request(boost::beast::http::verb::post, "/v1/audio/transcriptions", bad,
                             {{"Content-Type", "multipart/form-data; boundary=XyZ"}});
    EXPECT_EQ(r.result_int(), 400);
    EXPECT_NE(r.body().find("could not be decoded"), std::string::npos) << r.body();
    EXPECT_NE(r.body().find("\"param\":\"file\""), std::string::npos) << r.body();
    const auto json_body = d.post("/v1/audio/transcriptions", {{"file", "x"}});
    EXPECT_EQ(json_body.result_int(), 400);
    EXPECT_NE(json_body.body().find("multipart/form-data"), std::string::npos);
}

}  // namespace
}  // namespace ggufd::server
