// The model registry's lives of models: a folder listed by name, loads on demand (once however
// many ask), the memory budget's least-recently-used eviction, idle unloads and keep_alive, and
// never an unload under a request; and, through the API, requests that wait for a load. The models
// are fakes with a declared size; the daemon's real loads are tested end to end by
// tests/tools/test_models_dir.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>
#include <vector>

#include "server/api.h"
#include "server/api_error.h"
#include "server/model_registry.h"
#include "tests/server/fake_model.h"
#include "tests/server/waiting_channel.h"

namespace ggufd::server {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class SizedBackend : public testing::FakeBackend {
  public:
    SizedBackend(std::string name, uint64_t bytes) : FakeBackend(std::move(name)), bytes_(bytes) {}
    uint64_t memory_bytes() const override { return bytes_; }

  private:
    uint64_t bytes_;
};

// Files whose text starts with "bad" cannot be served; every model takes `bytes`.
class FakeLoader : public ModelLoader {
  public:
    Header inspect(const std::string& name, const fs::path& path) override {
        std::ifstream in(path);
        std::string text;
        std::getline(in, text);
        if (text.starts_with("bad")) throw std::runtime_error("truncated: " + text);
        return {{{"id", name}, {"architecture", "fake"}}, bytes};
    }
    std::shared_ptr<ModelBackend> load(const std::string& name, const fs::path&) override {
        ++loads;
        std::this_thread::sleep_for(load_time);
        return std::make_shared<SizedBackend>(name, bytes);
    }
    std::atomic<int> loads{0};
    uint64_t bytes = 100;
    std::chrono::milliseconds load_time{20};
};

class Folder {
  public:
    Folder() {
        path_ = fs::temp_directory_path() /
                ("ggufd_registry_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
        fs::remove_all(path_);
        fs::create_directories(path_);
    }
    ~Folder() { fs::remove_all(path_); }
    void write(const std::string& file, const std::string& text = "ok") const {
        std::ofstream(path_ / file) << text;
    }
    const fs::path& path() const { return path_; }

  private:
    static inline int counter_ = 0;
    fs::path path_;
};

// Acquires a model, waiting for its load: the lease, or the ApiError's status.
struct Got {
    std::shared_ptr<ModelLease> lease;
    int status = 0;
    std::string message;
};
Got acquire_wait(ModelRegistry& r, const std::string& name, KeepAlive keep_alive = {}) {
    auto done = std::make_shared<std::promise<Got>>();
    auto future = done->get_future();
    try {
        auto lease = r.acquire(name, keep_alive,
                               [done](std::shared_ptr<ModelLease> l, std::exception_ptr e) {
                                   Got g;
                                   g.lease = std::move(l);
                                   if (e) {
                                       try {
                                           std::rethrow_exception(e);
                                       } catch (const ApiError& err) {
                                           g.status = err.status();
                                           g.message = err.what();
                                       }
                                   }
                                   done->set_value(std::move(g));
                               });
        if (lease) return {std::move(lease), 0, {}};
    } catch (const ApiError& e) {
        return {nullptr, e.status(), e.what()};
    }
    if (future.wait_for(20s) != std::future_status::ready) return {nullptr, -1, "no answer"};
    return future.get();
}

bool eventually(const std::function<bool()>& ok) {
    for (int i = 0; i < 400; ++i) {
        if (ok()) return true;
        std::this_thread::sleep_for(10ms);
    }
    return ok();
}

struct FolderSetup {
    Folder folder;
    std::shared_ptr<FakeLoader> loader = std::make_shared<FakeLoader>();
    RegistryOptions options() {
        RegistryOptions o;
        o.models_dir = folder.path();
        o.loader = loader;
        return o;
    }
};

TEST(ModelsInDir, NamesByTheConventionOrTheStemWithSplitSetsAsOne) {
    Folder f;
    f.write("Tiny-Llama-1.1B-Chat-v1.0-Q8_0.gguf");
    f.write("Big-7B-Q4_K_M-00001-of-00002.gguf");
    f.write("Big-7B-Q4_K_M-00002-of-00002.gguf");
    f.write("my model.gguf");
    f.write("plain-00001-of-00003.gguf");
    f.write("plain-00002-of-00003.gguf");
    f.write("notes.txt");
    const auto found = models_in_dir(f.path());
    std::vector<std::string> names;
    for (const auto& [name, path] : found) names.push_back(name);
    EXPECT_EQ(names, (std::vector<std::string>{"Big-7B-Q4_K_M", "Tiny-Llama-1.1B-Chat-Q8_0",
                                               "my model", "plain"}));
    EXPECT_EQ(found.at("Big-7B-Q4_K_M").filename(), "Big-7B-Q4_K_M-00001-of-00002.gguf");
    EXPECT_EQ(found.at("plain").filename(), "plain-00001-of-00003.gguf");
}

TEST(ModelsInDir, TwoFilesOfOneConventionalNameGoByTheirStems) {
    Folder f;
    f.write("Phi-3B-Q8_0.gguf");
    f.write("Phi-3B-v2.0-Q8_0.gguf");
    const auto found = models_in_dir(f.path());
    ASSERT_EQ(found.size(), 2u);
    EXPECT_TRUE(found.count("Phi-3B-Q8_0"));
    EXPECT_TRUE(found.count("Phi-3B-v2.0-Q8_0"));
}

TEST(ModelRegistry, ListsTheFolderUnloadedAndNewFilesWithoutARestart) {
    FolderSetup s;
    s.folder.write("a.gguf");
    ModelRegistry r(s.options());
    EXPECT_EQ(r.names(), std::vector<std::string>{"a"});
    EXPECT_EQ(r.state("a"), ModelState::unloaded);
    EXPECT_EQ(r.describe("a", false)->at("state"), "unloaded");
    EXPECT_EQ(s.loader->loads, 0);
    s.folder.write("b.gguf");
    EXPECT_EQ(r.names(), (std::vector<std::string>{"a", "b"}));
    // A request naming a file that just arrived finds it too.
    s.folder.write("c.gguf");
    Got c = acquire_wait(r, "c");
    ASSERT_TRUE(c.lease) << c.message;
    EXPECT_EQ(c.lease->model().name(), "c");
}

TEST(ModelRegistry, ConcurrentFirstRequestsLoadOnce) {
    FolderSetup s;
    s.loader->load_time = 200ms;
    s.folder.write("m.gguf");
    ModelRegistry r(s.options());
    std::vector<std::future<Got>> got;
    for (int i = 0; i < 8; ++i) {
        got.push_back(std::async(std::launch::async, [&] { return acquire_wait(r, "m"); }));
    }
    for (auto& g : got) {
        Got x = g.get();
        ASSERT_TRUE(x.lease) << x.message;
    }
    EXPECT_EQ(s.loader->loads, 1);
    EXPECT_EQ(r.state("m"), ModelState::loaded);
}

TEST(ModelRegistry, TheBudgetEvictsTheLeastRecentlyUsedIdleModel) {
    FolderSetup s;
    for (auto n : {"a", "b", "c"}) s.folder.write(std::string(n) + ".gguf");
    RegistryOptions o = s.options();
    o.memory_budget = 250;  // two models of 100 bytes
    ModelRegistry r(std::move(o));
    ASSERT_TRUE(acquire_wait(r, "a").lease);
    std::this_thread::sleep_for(5ms);
    ASSERT_TRUE(acquire_wait(r, "b").lease);
    std::this_thread::sleep_for(5ms);
    ASSERT_TRUE(acquire_wait(r, "a").lease);  // a is now the more recent
    ASSERT_TRUE(acquire_wait(r, "c").lease);
    EXPECT_EQ(r.state("b"), ModelState::unloaded);
    EXPECT_EQ(r.state("a"), ModelState::loaded);
    EXPECT_EQ(r.state("c"), ModelState::loaded);
    EXPECT_LE(r.resident_bytes(), 250u);
}

TEST(ModelRegistry, AModelInUseIsNeverEvictedAndALoadWaitsForRoom) {
    FolderSetup s;
    for (auto n : {"a", "b", "c"}) s.folder.write(std::string(n) + ".gguf");
    RegistryOptions o = s.options();
    o.memory_budget = 250;
    ModelRegistry r(std::move(o));
    Got a = acquire_wait(r, "a");
    Got b = acquire_wait(r, "b");
    ASSERT_TRUE(a.lease && b.lease);
    // Both in use: c waits until one of them is done.
    auto c = std::async(std::launch::async, [&] { return acquire_wait(r, "c"); });
    EXPECT_EQ(c.wait_for(300ms), std::future_status::timeout);
    EXPECT_EQ(r.state("a"), ModelState::loaded);
    EXPECT_EQ(r.state("b"), ModelState::loaded);
    b.lease.reset();
    Got got = c.get();
    ASSERT_TRUE(got.lease) << got.message;
    EXPECT_EQ(r.state("a"), ModelState::loaded);
    EXPECT_EQ(r.state("b"), ModelState::unloaded);
    EXPECT_EQ(&a.lease->model(), r.find("a"));
}

TEST(ModelRegistry, ALoadThatFindsNoRoomInTimeAnswers503) {
    FolderSetup s;
    for (auto n : {"a", "b"}) s.folder.write(std::string(n) + ".gguf");
    RegistryOptions o = s.options();
    o.memory_budget = 150;
    o.load_wait = 200ms;
    ModelRegistry r(std::move(o));
    Got a = acquire_wait(r, "a");
    ASSERT_TRUE(a.lease);
    Got b = acquire_wait(r, "b");
    EXPECT_EQ(b.status, 503) << b.message;
    EXPECT_EQ(r.state("a"), ModelState::loaded);
    EXPECT_TRUE(eventually([&] { return r.state("b") == ModelState::unloaded; }));
}

TEST(ModelRegistry, AModelLargerThanTheBudgetFailsWithTheReason) {
    FolderSetup s;
    s.folder.write("a.gguf");
    RegistryOptions o = s.options();
    o.memory_budget = 50;
    ModelRegistry r(std::move(o));
    Got a = acquire_wait(r, "a");
    EXPECT_EQ(a.status, 404);
    EXPECT_NE(a.message.find("memory-budget"), std::string::npos) << a.message;
    EXPECT_EQ(r.state("a"), ModelState::failed);
}

TEST(ModelRegistry, IdleModelsAreUnloadedAndKeepAliveOverridesIt) {
    FolderSetup s;
    for (auto n : {"a", "b", "c"}) s.folder.write(std::string(n) + ".gguf");
    RegistryOptions o = s.options();
    o.idle_unload = 300ms;
    ModelRegistry r(std::move(o));
    acquire_wait(r, "a");                                // the server's idle time
    acquire_wait(r, "b", kKeepLoaded);                   // keep_alive -1
    acquire_wait(r, "c", std::chrono::milliseconds(0));  // keep_alive 0
    EXPECT_TRUE(eventually([&] { return r.state("c") == ModelState::unloaded; }));
    EXPECT_EQ(r.state("a"), ModelState::loaded);  // well within its 300 ms
    EXPECT_TRUE(eventually([&] { return r.state("a") == ModelState::unloaded; }));
    std::this_thread::sleep_for(400ms);
    EXPECT_EQ(r.state("b"), ModelState::loaded);
}

TEST(ModelRegistry, UnloadWaitsForTheRequestsInFlight) {
    FolderSetup s;
    s.folder.write("a.gguf");
    ModelRegistry r(s.options());
    Got a = acquire_wait(r, "a");
    ASSERT_TRUE(a.lease);
    EXPECT_TRUE(r.unload("a"));
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(r.state("a"), ModelState::loaded);  // a request still uses it
    a.lease.reset();
    EXPECT_TRUE(eventually([&] { return r.state("a") == ModelState::unloaded; }));
    // And it comes back on the next request.
    EXPECT_TRUE(acquire_wait(r, "a").lease);
    EXPECT_EQ(s.loader->loads, 2);
}

TEST(ModelRegistry, AnUnservableFileIsListedAsFailedWithTheReason) {
    FolderSetup s;
    s.folder.write("good.gguf");
    s.folder.write("broken.gguf", "bad header");
    ModelRegistry r(s.options());
    EXPECT_EQ(r.state("broken"), ModelState::failed);
    const auto d = r.describe("broken", false);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->at("state"), "failed");
    EXPECT_NE(d->at("error").get<std::string>().find("truncated"), std::string::npos);
    Got b = acquire_wait(r, "broken");
    EXPECT_EQ(b.status, 404);
    EXPECT_NE(b.message.find("truncated"), std::string::npos) << b.message;
    EXPECT_TRUE(acquire_wait(r, "good").lease);
    // Fixed in place, it is read again.
    std::this_thread::sleep_for(10ms);
    s.folder.write("broken.gguf", "fine now, and longer");
    EXPECT_TRUE(acquire_wait(r, "broken").lease);
}

TEST(ModelRegistry, PinnedModelsStayAndAnUnknownNameIs404) {
    FolderSetup s;
    s.folder.write("a.gguf");
    RegistryOptions o = s.options();
    o.load_wait = 200ms;
    o.memory_budget = 150;
    ModelRegistry r(std::move(o));
    r.add(std::make_shared<SizedBackend>("pinned", 100));  // no file: cannot be unloaded
    EXPECT_EQ(r.names(), (std::vector<std::string>{"pinned", "a"}));
    EXPECT_EQ(acquire_wait(r, "nope").status, 404);
    Got a = acquire_wait(r, "a");  // no room beside the pinned model, which is never evicted
    EXPECT_NE(a.status, 0);
    EXPECT_EQ(r.state("pinned"), ModelState::loaded);
    EXPECT_THROW(r.unload("pinned"), ApiError);
    EXPECT_FALSE(r.unload("nope"));
}

// A request whose model is not loaded yet is parked with its parsed form and goes on once the
// load ends, without being routed, authorised or validated again: the drain that began while it
// waited would refuse it at a second check. Both first requests share the one load, and the
// access log learns how long each waited.
TEST(ApiModelWait, AParkedRequestGoesOnAfterTheLoadWithoutASecondCheck) {
    FolderSetup s;
    s.loader->load_time = 300ms;
    s.folder.write("m.gguf");
    ModelRegistry registry(s.options());
    Api api(registry, {});
    HttpRequest request;
    request.method = "POST";
    request.path = "/tokenize";
    request.body = R"({"model": "m", "content": "hi"})";
    std::vector<std::shared_ptr<testing::WaitingChannel>> channels;
    for (int i = 0; i < 2; ++i) {
        channels.push_back(std::make_shared<testing::WaitingChannel>());
        api.handle(request, channels.back());
    }
    EXPECT_EQ(registry.state("m"), ModelState::loading);
    api.start_draining();
    for (const auto& channel : channels) {
        const HttpResponse r = channel->wait();
        EXPECT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(nlohmann::json::parse(r.body)["tokens"].size(), 2u) << r.body;
        EXPECT_GE(channel->access().load_wait_s, 0.2);
        EXPECT_EQ(channel->access().model, "m");
    }
    EXPECT_EQ(s.loader->loads, 1);
}

}  // namespace
}  // namespace ggufd::server
