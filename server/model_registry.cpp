#include "server/model_registry.h"

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "gguf/inspect.h"
#include "gguf/naming.h"
#include "gguf/split.h"
#include "server/api_error.h"

namespace ggufd::server {

using Clock = std::chrono::steady_clock;

namespace detail {

struct RegistryEntry {
    std::string name;
    std::filesystem::path path;  // empty: held in memory, cannot be loaded again
    bool pinned = false;
    bool from_dir = false;
    ModelState state = ModelState::unloaded;
    std::string error;                      // why it failed
    std::shared_ptr<ModelBackend> backend;  // while loaded
    nlohmann::json header;                  // the file's description; null when not read
    uint64_t bytes = 0;  // the header's estimate, then what the model measured when loaded
    std::time_t created = 0;
    // What the folder's file looked like when its header was read.
    uintmax_t file_size = 0;
    std::filesystem::file_time_type file_time{};
    // Requests holding a lease, and the last one's end and keep_alive.
    int in_flight = 0;
    Clock::time_point last_used = Clock::now();
    KeepAlive keep_alive;
    bool unload_requested = false;
    struct Waiter {
        Clock::time_point deadline;
        ModelRegistry::WhenLoaded when_loaded;
        KeepAlive keep_alive;  // its request's
    };
    std::vector<Waiter> waiters;
};

struct RegistryCore : std::enable_shared_from_this<RegistryCore> {
    RegistryOptions options;
    mutable std::mutex mutex;
    std::condition_variable changed;  // wakes the loader and the housekeeper
    std::vector<std::shared_ptr<RegistryEntry>> entries;
    std::map<std::string, std::string> failed_at_start;  // name -> reason
    std::deque<std::shared_ptr<RegistryEntry>> load_queue;
    bool stopping = false;
    std::mutex scan_mutex;  // one folder scan at a time
    std::thread loader, housekeeper;

    std::shared_ptr<RegistryEntry> find(const std::string& name) const {
        for (const auto& e : entries) {
            if (e->name == name) return e;
        }
        return nullptr;
    }
    uint64_t resident_locked(const RegistryEntry* except = nullptr) const {
        uint64_t sum = 0;
        for (const auto& e : entries) {
            if (e.get() != except && e->backend) sum += e->backend->memory_bytes();
        }
        return sum;
    }
    // When an idle, loaded model is due to be unloaded; nullopt: not by time.
    std::optional<Clock::time_point> expiry(const RegistryEntry& e) const {
        if (e.unload_requested) return e.last_used;
        if (e.pinned) return std::nullopt;
        std::chrono::milliseconds keep = e.keep_alive.value_or(options.idle_unload);
        if (keep == kKeepLoaded || (!e.keep_alive && keep.count() == 0)) return std::nullopt;
        return e.last_used + keep;
    }
    void loader_loop();
    void housekeeper_loop();
    // Takes the model out of a loaded entry (lock held); the caller destroys it unlocked and
    // calls finish_unload.
    std::shared_ptr<ModelBackend> take_backend(RegistryEntry& e) {
        e.bytes = e.backend->memory_bytes();
        e.state = ModelState::unloaded;
        e.unload_requested = false;
        return std::move(e.backend);
    }
    void finish_unload(const std::string& name, std::shared_ptr<ModelBackend> backend) {
        backend.reset();  // joins the model's scheduler thread
        spdlog::info("model '{}' unloaded", name);
        if (options.on_unload) options.on_unload(name);
    }
    // Unloads least recently used idle models until `need` more bytes fit the budget (lock held,
    // released while a model is destroyed). False when what is left in use does not leave room.
    bool make_room(std::unique_lock<std::mutex>& lock, const RegistryEntry& for_entry,
                   uint64_t need);
};

}  // namespace detail

using detail::RegistryCore;
using detail::RegistryEntry;

std::string_view state_name(ModelState state) {
    switch (state) {
        case ModelState::unloaded:
            return "unloaded";
        case ModelState::loading:
            return "loading";
        case ModelState::loaded:
            return "loaded";
        case ModelState::failed:
            return "failed";
    }
    return "unknown";
}

ModelLease::ModelLease(std::shared_ptr<RegistryCore> core, std::shared_ptr<RegistryEntry> entry,
                       std::shared_ptr<ModelBackend> backend, KeepAlive keep_alive)
    : core_(std::move(core)),
      entry_(std::move(entry)),
      backend_(std::move(backend)),
      keep_alive_(keep_alive) {}

ModelLease::~ModelLease() {
    // Never the model's last owner: the entry keeps it while a lease exists, so it is destroyed
    // by the registry, never on the thread that ends a request (a scheduler's, maybe).
    backend_.reset();
    std::lock_guard lock(core_->mutex);
    --entry_->in_flight;
    entry_->last_used = Clock::now();
    entry_->keep_alive = keep_alive_;
    core_->changed.notify_all();
}

bool RegistryCore::make_room(std::unique_lock<std::mutex>& lock, const RegistryEntry& for_entry,
                             uint64_t need) {
    const uint64_t budget = options.memory_budget;
    while (budget > 0 && resident_locked(&for_entry) + need > budget) {
        std::shared_ptr<RegistryEntry> victim;
        for (const auto& e : entries) {
            if (e.get() == &for_entry || !e->backend || e->pinned || e->in_flight > 0) continue;
            if (!victim || e->last_used < victim->last_used) victim = e;
        }
        if (!victim) return false;
        spdlog::info("model '{}' unloaded to make room for '{}' (--memory-budget {})", victim->name,
                     for_entry.name, gguf::human_bytes(budget));
        auto backend = take_backend(*victim);
        lock.unlock();
        finish_unload(victim->name, std::move(backend));
        lock.lock();
    }
    return true;
}

void RegistryCore::loader_loop() {
    std::unique_lock lock(mutex);
    while (true) {
        changed.wait(lock, [&] { return stopping || !load_queue.empty(); });
        if (stopping) return;
        std::shared_ptr<RegistryEntry> e = load_queue.front();
        load_queue.pop_front();
        if (e->state != ModelState::loading) continue;
        const std::string name = e->name;
        const std::filesystem::path path = e->path;

        std::string error;
        const uint64_t budget = options.memory_budget;
        if (budget > 0 && e->bytes > budget) {
            error = fmt::format("it needs {} but --memory-budget is {}",
                                gguf::human_bytes(e->bytes), gguf::human_bytes(budget));
        }
        // Room is made from idle models; while the models in use leave none, wait for one of
        // them to finish, as long as someone still waits for this one.
        while (error.empty() && !make_room(lock, *e, e->bytes)) {
            if (stopping) return;
            if (e->waiters.empty()) break;
            Clock::time_point until = e->waiters.front().deadline;
            for (const auto& w : e->waiters) until = std::min(until, w.deadline);
            changed.wait_until(lock, until);
        }
        if (stopping) return;
        if (error.empty() && e->waiters.empty() && options.memory_budget > 0 &&
            resident_locked(e.get()) + e->bytes > budget) {
            e->state = ModelState::unloaded;  // nobody waits any more, and there is no room
            continue;
        }

        std::shared_ptr<ModelBackend> backend;
        double seconds = 0;
        if (error.empty()) {
            lock.unlock();
            const auto t0 = Clock::now();
            try {
                backend = options.loader->load(name, path);
            } catch (const std::bad_alloc&) {
                error = "out of memory";
            } catch (const std::exception& ex) {
                error = ex.what();
            }
            seconds = std::chrono::duration<double>(Clock::now() - t0).count();
            lock.lock();
        }
        std::vector<RegistryEntry::Waiter> waiters = std::move(e->waiters);
        e->waiters.clear();
        std::vector<std::shared_ptr<ModelLease>> leases;
        if (backend) {
            e->backend = backend;
            e->state = ModelState::loaded;
            e->error.clear();
            e->bytes = backend->memory_bytes();
            e->last_used = Clock::now();
            e->keep_alive.reset();
            // The waiters get their leases now, so the model cannot go idle before they use it.
            for (size_t i = 0; i < waiters.size(); ++i) {
                ++e->in_flight;
                leases.push_back(std::make_shared<ModelLease>(shared_from_this(), e, backend,
                                                              waiters[i].keep_alive));
            }
            // The estimate made room before the load; what the model measured decides now.
            make_room(lock, *e, e->bytes);
        } else {
            e->state = ModelState::failed;
            e->error = error;
        }
        lock.unlock();
        if (backend) {
            spdlog::info("model '{}' loaded from {} in {:.3f} s ({})", name, path.string(), seconds,
                         gguf::human_bytes(backend->memory_bytes()));
            if (options.on_load) options.on_load(name, *backend, seconds);
        } else {
            spdlog::error("model '{}' ({}) failed to load: {}", name, path.string(), error);
        }
        const auto failure = std::make_exception_ptr(
            ApiError(404, "invalid_request_error",
                     fmt::format("The model '{}' failed to load: {}", name, error), "model",
                     "model_load_failed"));
        for (size_t i = 0; i < waiters.size(); ++i) {
            if (backend) {
                waiters[i].when_loaded(std::move(leases[i]), nullptr);
            } else {
                waiters[i].when_loaded(nullptr, failure);
            }
        }
        leases.clear();
        backend.reset();
        lock.lock();
    }
}

void RegistryCore::housekeeper_loop() {
    std::unique_lock lock(mutex);
    while (!stopping) {
        const auto now = Clock::now();
        auto next = Clock::time_point::max();
        std::vector<ModelRegistry::WhenLoaded> timed_out;
        std::vector<std::pair<std::string, std::shared_ptr<ModelBackend>>> unloads;
        for (const auto& e : entries) {
            auto& ws = e->waiters;
            for (auto it = ws.begin(); it != ws.end();) {
                if (it->deadline <= now) {
                    timed_out.push_back(std::move(it->when_loaded));
                    it = ws.erase(it);
                } else {
                    next = std::min(next, it->deadline);
                    ++it;
                }
            }
            if (e->state != ModelState::loaded || e->in_flight > 0 || e->path.empty()) continue;
            if (auto at = expiry(*e)) {
                if (*at <= now) {
                    unloads.emplace_back(e->name, take_backend(*e));
                } else {
                    next = std::min(next, *at);
                }
            }
        }
        if (!timed_out.empty() || !unloads.empty()) {
            lock.unlock();
            for (auto& [name, backend] : unloads) finish_unload(name, std::move(backend));
            const auto error = std::make_exception_ptr(ApiError::unavailable(
                fmt::format("the model is still loading after {} s; retry later",
                            std::chrono::duration<double>(options.load_wait).count()),
                "model_loading", options.retry_after_s));
            for (auto& w : timed_out) w(nullptr, error);
            lock.lock();
            continue;  // the clock moved on
        }
        if (next == Clock::time_point::max()) {
            changed.wait(lock);
        } else {
            changed.wait_until(lock, next);
        }
    }
}

ModelRegistry::ModelRegistry() : ModelRegistry(RegistryOptions{}) {}

ModelRegistry::ModelRegistry(RegistryOptions options) : core_(std::make_shared<RegistryCore>()) {
    core_->options = std::move(options);
    core_->loader = std::thread([core = core_.get()] { core->loader_loop(); });
    core_->housekeeper = std::thread([core = core_.get()] { core->housekeeper_loop(); });
    rescan();
}

ModelRegistry::~ModelRegistry() {
    std::vector<RegistryEntry::Waiter> waiters;
    {
        std::lock_guard lock(core_->mutex);
        core_->stopping = true;
        core_->changed.notify_all();
    }
    core_->loader.join();
    core_->housekeeper.join();
    std::lock_guard lock(core_->mutex);
    const auto error = std::make_exception_ptr(
        ApiError::unavailable("the server is stopping", "shutting_down", 1));
    for (const auto& e : core_->entries) {
        for (auto& w : e->waiters) w.when_loaded(nullptr, error);
        e->waiters.clear();
    }
}

void ModelRegistry::add(std::shared_ptr<ModelBackend> backend, std::filesystem::path path) {
    if (!backend) throw std::invalid_argument("ModelRegistry::add: null backend");
    std::string name = backend->name();
    if (name.empty()) throw std::invalid_argument("ModelRegistry::add: a model needs a name");
    std::lock_guard lock(core_->mutex);
    if (core_->find(name)) {
        throw std::invalid_argument("ModelRegistry::add: two models are named '" + name + "'");
    }
    auto e = std::make_shared<RegistryEntry>();
    e->name = std::move(name);
    e->path = std::move(path);
    e->pinned = true;
    e->state = ModelState::loaded;
    e->bytes = backend->memory_bytes();
    e->backend = std::move(backend);
    e->created = std::time(nullptr);
    // Models given one by one come before the folder's.
    auto first_from_dir = std::find_if(core_->entries.begin(), core_->entries.end(),
                                       [](const auto& x) { return x->from_dir; });
    core_->entries.insert(first_from_dir, std::move(e));
}

void ModelRegistry::add_failed(const std::string& name, const std::string& reason) {
    std::lock_guard lock(core_->mutex);
    core_->failed_at_start[name] = reason;
}

std::vector<std::string> ModelRegistry::failed_at_start() const {
    std::lock_guard lock(core_->mutex);
    std::vector<std::string> out;
    for (const auto& [name, reason] : core_->failed_at_start) out.push_back(name);
    return out;
}

std::shared_ptr<ModelLease> ModelRegistry::acquire(const std::string& name, KeepAlive keep_alive,
                                                   WhenLoaded when_loaded) {
    std::unique_lock lock(core_->mutex);
    std::shared_ptr<RegistryEntry> e;
    if (name.empty()) {
        if (core_->entries.size() == 1 && core_->failed_at_start.empty()) {
            e = core_->entries.front();
        } else {
            throw ApiError::bad_request(
                fmt::format("'model' is required: {} models are served", core_->entries.size()),
                "model");
        }
    } else {
        e = core_->find(name);
        if ((!e || e->state == ModelState::failed) && !core_->options.models_dir.empty()) {
            lock.unlock();
            rescan();  // a file that just arrived, or one fixed in place
            lock.lock();
            e = core_->find(name);
        }
    }
    if (!e) {
        auto failed = core_->failed_at_start.find(name);
        if (failed != core_->failed_at_start.end()) {
            throw ApiError::not_found(
                fmt::format("The model '{}' failed to load when the server started", name),
                "model_not_found");
        }
        throw ApiError::not_found(fmt::format("The model '{}' does not exist", name),
                                  "model_not_found");
    }
    switch (e->state) {
        case ModelState::loaded:
            ++e->in_flight;
            e->unload_requested = false;
            return std::make_shared<ModelLease>(core_, e, e->backend, keep_alive);
        case ModelState::failed:
            throw ApiError(404, "invalid_request_error",
                           fmt::format("The model '{}' cannot be loaded: {}", e->name, e->error),
                           "model", "model_load_failed");
        case ModelState::unloaded:
            if (e->path.empty() || !core_->options.loader) {
                throw ApiError::not_found(
                    fmt::format("The model '{}' was unloaded and cannot be loaded again", e->name),
                    "model_not_found");
            }
            e->state = ModelState::loading;
            core_->load_queue.push_back(e);
            break;
        case ModelState::loading:
            break;
    }
    e->waiters.push_back(
        {Clock::now() + core_->options.load_wait, std::move(when_loaded), keep_alive});
    core_->changed.notify_all();
    return nullptr;
}

bool ModelRegistry::unload(const std::string& name) {
    std::unique_lock lock(core_->mutex);
    std::shared_ptr<RegistryEntry> e = core_->find(name);
    if (!e) return false;
    if (e->state != ModelState::loaded) return true;
    if (e->path.empty()) {
        throw ApiError(409, "invalid_request_error",
                       fmt::format("The model '{}' has no file to load it from again, so it "
                                   "stays loaded",
                                   name),
                       {}, "model_pinned");
    }
    if (e->in_flight > 0) {
        e->unload_requested = true;  // the housekeeper unloads it once the last request ends
        return true;
    }
    auto backend = core_->take_backend(*e);
    lock.unlock();
    core_->finish_unload(name, std::move(backend));
    return true;
}

std::vector<std::string> ModelRegistry::names() {
    rescan();
    std::lock_guard lock(core_->mutex);
    std::vector<std::string> out;
    for (const auto& e : core_->entries) out.push_back(e->name);
    return out;
}

std::optional<nlohmann::json> ModelRegistry::describe(const std::string& name, bool full) {
    std::unique_lock lock(core_->mutex);
    std::shared_ptr<RegistryEntry> e = core_->find(name);
    if (!e && !core_->options.models_dir.empty()) {
        lock.unlock();
        rescan();
        lock.lock();
        e = core_->find(name);
    }
    if (!e) return std::nullopt;
    nlohmann::json d;
    if (e->backend) {
        std::shared_ptr<ModelBackend> backend = e->backend;
        lock.unlock();  // the backend describes itself without the registry's lock
        d = backend->describe(full);
        d["memory_bytes"] = backend->memory_bytes();
        lock.lock();
    } else {
        d = e->header.is_object() ? e->header : nlohmann::json{{"id", e->name}};
        if (!full) d.erase("metadata");
        d["id"] = e->name;
        d["memory_bytes"] = 0;
        d["memory_bytes_needed"] = e->bytes;  // the header's estimate, or the last load's measure
    }
    d["state"] = state_name(e->state);
    if (e->state == ModelState::failed) d["error"] = e->error;
    d["pinned"] = e->pinned;
    d["requests_in_flight"] = e->in_flight;
    if (!e->path.empty()) d["path"] = e->path.string();
    return d;
}

std::time_t ModelRegistry::created(const std::string& name) const {
    std::lock_guard lock(core_->mutex);
    auto e = core_->find(name);
    return e ? e->created : 0;
}

std::optional<std::chrono::system_clock::time_point> ModelRegistry::unload_due(
    const std::string& name) const {
    std::lock_guard lock(core_->mutex);
    auto e = core_->find(name);
    if (!e || !e->backend) return std::nullopt;
    const std::optional<Clock::time_point> due = core_->expiry(*e);
    if (!due) return std::nullopt;
    return std::chrono::system_clock::now() +
           std::chrono::duration_cast<std::chrono::system_clock::duration>(*due - Clock::now());
}

const std::filesystem::path& ModelRegistry::models_dir() const {
    return core_->options.models_dir;
}

std::optional<ModelState> ModelRegistry::state(const std::string& name) const {
    std::lock_guard lock(core_->mutex);
    auto e = core_->find(name);
    if (!e) return std::nullopt;
    return e->state;
}

bool ModelRegistry::all_ready() const {
    std::lock_guard lock(core_->mutex);
    if (core_->entries.empty() && core_->options.models_dir.empty()) return false;
    for (const auto& e : core_->entries) {
        if (e->backend && !e->backend->is_ready()) return false;
    }
    return true;
}

uint64_t ModelRegistry::resident_bytes() const {
    std::lock_guard lock(core_->mutex);
    return core_->resident_locked();
}

ModelBackend* ModelRegistry::find(const std::string& name) const {
    std::lock_guard lock(core_->mutex);
    auto e = core_->find(name);
    return e ? e->backend.get() : nullptr;
}

void ModelRegistry::rescan() {
    const std::filesystem::path& dir = core_->options.models_dir;
    if (dir.empty()) return;
    std::lock_guard scan_lock(core_->scan_mutex);
    std::map<std::string, std::filesystem::path> found;
    try {
        found = models_in_dir(dir);
    } catch (const std::filesystem::filesystem_error& e) {
        spdlog::warn("models folder {}: {}", dir.string(), e.what());
        return;
    }
    for (const auto& [name, path] : found) {
        std::error_code ec;
        const uintmax_t size = std::filesystem::file_size(path, ec);
        const auto time = std::filesystem::last_write_time(path, ec);
        if (ec) continue;  // gone meanwhile
        {
            std::lock_guard lock(core_->mutex);
            auto e = core_->find(name);
            if (e && (!e->from_dir ||
                      (e->path == path && e->file_size == size && e->file_time == time))) {
                continue;  // a model given by --model keeps its name; an unchanged file
            }
        }
        // The header is read without the registry's lock: requests go on meanwhile.
        ModelLoader::Header header;
        std::string error;
        try {
            if (!core_->options.loader) throw std::runtime_error("no loader");
            header = core_->options.loader->inspect(name, path);
        } catch (const std::exception& ex) {
            error = ex.what();
        }
        std::lock_guard lock(core_->mutex);
        auto e = core_->find(name);
        if (!e) {
            e = std::make_shared<RegistryEntry>();
            e->name = name;
            e->from_dir = true;
            e->created = std::time(nullptr);
            auto at = std::find_if(core_->entries.begin(), core_->entries.end(),
                                   [&](const auto& x) { return x->from_dir && x->name > name; });
            core_->entries.insert(at, e);
        }
        e->path = path;
        e->file_size = size;
        e->file_time = time;
        e->header = std::move(header.description);
        if (!error.empty()) {
            spdlog::warn("models folder: '{}' ({}) cannot be served: {}", name, path.string(),
                         error);
            if (e->state != ModelState::loaded && e->state != ModelState::loading) {
                e->state = ModelState::failed;
                e->error = error;
            }
        } else {
            e->bytes = header.bytes;
            if (e->state == ModelState::failed) e->state = ModelState::unloaded;
            e->error.clear();
        }
    }
    // Files that left the folder: their models go once nothing uses them.
    std::lock_guard lock(core_->mutex);
    std::erase_if(core_->entries, [&](const std::shared_ptr<RegistryEntry>& e) {
        return e->from_dir && !found.count(e->name) &&
               (e->state == ModelState::unloaded || e->state == ModelState::failed) &&
               e->waiters.empty();
    });
}

std::map<std::string, std::filesystem::path> models_in_dir(const std::filesystem::path& dir) {
    struct Candidate {
        std::filesystem::path path;
        std::string conventional, stem;
    };
    std::vector<Candidate> candidates;
    for (const auto& item : std::filesystem::directory_iterator(dir)) {
        std::error_code ec;
        if (!item.is_regular_file(ec) || item.path().extension() != ".gguf") continue;
        // A projector is its model's (EngineLoader pairs it), not a model of its own.
        if (item.path().filename().string().starts_with("mmproj-")) continue;
        const auto split = gguf::parse_split_name(item.path());
        if (split && split->no != 0) continue;  // a later file of a set: the first names it
        Candidate c{item.path(),
                    {},
                    split ? split->prefix.filename().string() : item.path().stem().string()};
        if (auto parts = gguf::parse_filename(item.path().filename().string())) {
            for (const std::string* part : {&parts->basename, &parts->size_label, &parts->finetune,
                                            &parts->encoding, &parts->type}) {
                if (part->empty()) continue;
                if (!c.conventional.empty()) c.conventional += '-';
                c.conventional += *part;
            }
        }
        candidates.push_back(std::move(c));
    }
    std::map<std::string, int> uses;
    for (const auto& c : candidates) ++uses[c.conventional.empty() ? c.stem : c.conventional];
    std::map<std::string, std::filesystem::path> out;
    for (const auto& c : candidates) {
        std::string name = c.conventional.empty() ? c.stem : c.conventional;
        if (uses[name] > 1) name = c.stem;
        if (out.count(name)) name = c.path.filename().string();
        out[name] = c.path;
    }
    return out;
}

}  // namespace ggufd::server
