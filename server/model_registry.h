// The set of models the server answers for, and their lives: the one place that knows name ->
// model. Models given one by one (--model, the demo) are loaded before the server starts and
// pinned; a models folder (--models-dir) is listed from the files' headers and each of its models
// is loaded when a request first names it, unloaded when idle (--idle-unload, a request's
// keep_alive) or, least recently used first, when another needs the room (--memory-budget). A
// model with requests in flight (a ModelLease held) is never unloaded.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/model_backend.h"

namespace ggufd::server {

enum class ModelState { unloaded, loading, loaded, failed };
std::string_view state_name(ModelState state);

// How long a model stays loaded after a request, as Ollama's keep_alive has it: nullopt = the
// server's --idle-unload, zero = unload once the request ends, kKeepLoaded = never idle-unload.
using KeepAlive = std::optional<std::chrono::milliseconds>;
inline constexpr std::chrono::milliseconds kKeepLoaded = std::chrono::milliseconds::max();

// What the registry needs to list and load models from files: the engine's side (EngineLoader in
// engine_backend.h), a fake in tests.
class ModelLoader {
  public:
    virtual ~ModelLoader() = default;
    struct Header {
        nlohmann::json description;  // for /models while not loaded (with "metadata": every key)
        uint64_t bytes = 0;          // memory it will take loaded: weights and KV cache
    };
    // Reads the file's header (the set's, for a split model) without reading any tensor; throws
    // with the reason when the file cannot be served (truncated, unsupported, ...).
    virtual Header inspect(const std::string& name, const std::filesystem::path& path) = 0;
    // Loads it (may take seconds); throws with the reason.
    virtual std::shared_ptr<ModelBackend> load(const std::string& name,
                                               const std::filesystem::path& path) = 0;
};

struct RegistryOptions {
    std::filesystem::path models_dir;  // empty: no folder
    uint64_t memory_budget = 0;        // bytes of every loaded model together; 0: no limit
    std::chrono::milliseconds idle_unload{
        0};  // a folder model idle this long is unloaded; 0: never
    std::chrono::milliseconds load_wait{std::chrono::seconds(120)};  // a request waits this long
    int retry_after_s = 1;                // Retry-After of a request that waited in vain
    std::shared_ptr<ModelLoader> loader;  // needed for a folder and to reload an unloaded model
    // Called (outside the registry's lock) after a load, with its seconds, and after an unload.
    std::function<void(const std::string& name, ModelBackend& model, double seconds)> on_load;
    std::function<void(const std::string& name)> on_unload;
};

namespace detail {
struct RegistryCore;
struct RegistryEntry;
}  // namespace detail

// A loaded model in use by one request: while any lease is held the model stays loaded.
class ModelLease {
  public:
    ModelLease(std::shared_ptr<detail::RegistryCore> core,
               std::shared_ptr<detail::RegistryEntry> entry, std::shared_ptr<ModelBackend> backend,
               KeepAlive keep_alive);
    ~ModelLease();
    ModelLease(const ModelLease&) = delete;
    ModelLease& operator=(const ModelLease&) = delete;
    ModelBackend& model() const { return *backend_; }

  private:
    std::shared_ptr<detail::RegistryCore> core_;
    std::shared_ptr<detail::RegistryEntry> entry_;
    std::shared_ptr<ModelBackend> backend_;
    KeepAlive keep_alive_;
};

// Thread-safe; every method but the constructor and destructor may be called from any thread.
class ModelRegistry {
  public:
    // Called once a load the caller waits for has ended: with a lease on the loaded model, or
    // with the error to answer (an ApiError) and no lease.
    using WhenLoaded = std::function<void(std::shared_ptr<ModelLease>, std::exception_ptr)>;

    ModelRegistry();  // no folder, no loader: tests and the demo
    explicit ModelRegistry(RegistryOptions options);
    ~ModelRegistry();
    ModelRegistry(const ModelRegistry&) = delete;
    ModelRegistry& operator=(const ModelRegistry&) = delete;

    // A loaded model, pinned (never unloaded unless asked by POST /models/{id}/unload, which
    // needs its `path` to load it again). Throws std::invalid_argument for an empty or duplicate
    // name.
    void add(std::shared_ptr<ModelBackend> backend, std::filesystem::path path = {});
    // A configured model that failed to load and is left out (--skip-bad-models): requests naming
    // it get 404 saying so, /health lists it.
    void add_failed(const std::string& name, const std::string& reason = {});
    std::vector<std::string> failed_at_start() const;

    // The named model (empty: the only one) for a request: a lease when it is loaded. When it is
    // not, its load starts (once, however many ask), nullptr is returned and `when_loaded` is
    // called later from the registry's thread (at most once, after `load_wait` at the latest).
    // Throws ApiError: 404 unknown, 404 failed (with the reason), 400 no name among several.
    std::shared_ptr<ModelLease> acquire(const std::string& name, KeepAlive keep_alive,
                                        WhenLoaded when_loaded);
    // Unloads it now when no request uses it, else once the last one ends; false when unknown.
    // Throws ApiError 409 for a model that could not be loaded again (no file).
    bool unload(const std::string& name);

    // The models' names, in order (pinned first, then the folder's by name); rescans the folder.
    std::vector<std::string> names();
    // For /models: the loaded model's own description or the file's header, with "state"
    // ("error" when failed), "pinned", "memory_bytes" when loaded; nullopt when unknown. Rescans
    // the folder when the name is unknown.
    std::optional<nlohmann::json> describe(const std::string& name, bool full);
    // When the model was added (Unix seconds), for /v1/models "created"; 0 when unknown.
    std::time_t created(const std::string& name) const;
    std::optional<ModelState> state(const std::string& name) const;
    // Ready to serve: there is something to serve and no pinned model is still loading.
    bool all_ready() const;
    // Bytes of every loaded model together (what --memory-budget bounds).
    uint64_t resident_bytes() const;
    // When the loaded model is due to be unloaded for idleness (its keep_alive or --idle-unload,
    // counted from its last request's end); nullopt: never by time, or not loaded.
    std::optional<std::chrono::system_clock::time_point> unload_due(const std::string& name) const;
    // The --models-dir folder; empty when none.
    const std::filesystem::path& models_dir() const;

    // Reads the folder again: new files are listed, changed ones read again, gone ones dropped
    // (once unloaded). Called by names() and by acquire()/describe() for an unknown name.
    void rescan();

    // For tests: a loaded model by name without a lease; nullptr when not loaded.
    ModelBackend* find(const std::string& name) const;

  private:
    std::shared_ptr<detail::RegistryCore> core_;
};

// The model names a folder's files give (name -> path of the file to open: the first of a split
// set), by the naming convention's base name, size label, fine-tune and encoding, else the file's
// stem (without a split suffix); when two files would share a name, both go by their stems.
std::map<std::string, std::filesystem::path> models_in_dir(const std::filesystem::path& dir);

}  // namespace ggufd::server
