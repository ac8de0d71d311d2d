// The responses OpenAI's Responses API keeps (`store`, true unless the request says false), so
// that a later request continues the conversation with `previous_response_id` and a client can
// read one back (GET /v1/responses/{id}) or delete it. It lives in memory, one per server
// process (not per model): bounded in count and in bytes, the least recently used dropped first,
// and each response dropped once its lifetime has passed since it was stored. A restart forgets
// everything; a client that needs more sends the whole conversation as `input` (Codex does).
//
// Each response keeps only its own input items and output, with the id it continued: a chain is
// followed link by link, so a long conversation costs memory once, not once per turn. A link
// that is gone (expired, evicted, deleted) makes the whole chain unknown.
//
// Thread-safe: handlers on several sessions' strands use it at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace ggufd::server {

struct ResponseStoreLimits {
    size_t max_responses = 1024;
    size_t max_bytes = size_t{64} << 20;  // the stored JSON's size, input and response together
    std::chrono::seconds lifetime{3600};
};

class ResponseStore {
  public:
    using Clock = std::function<std::chrono::steady_clock::time_point()>;

    explicit ResponseStore(ResponseStoreLimits limits = {}, Clock clock = {});

    // Keeps `response` (its "id" is the key) with the input items of its request and the id of
    // the response it continued ("" for none). A response larger than the whole budget is not
    // kept.
    void put(const nlohmann::json& response, nlohmann::json input_items,
             const std::string& previous_id);

    // The stored response object, or nullopt.
    std::optional<nlohmann::json> get(const std::string& id);
    // Its request's own input items (not the earlier responses'), or nullopt.
    std::optional<nlohmann::json> input_items(const std::string& id);
    bool erase(const std::string& id);

    // The conversation `id` ends: every link's input items then its output items, oldest
    // first. nullopt when `id` or any response it continues is no longer stored; `missing` then
    // names the first link not found.
    std::optional<nlohmann::json> conversation(const std::string& id,
                                               std::string* missing = nullptr);

    size_t size() const;
    size_t bytes() const;

  private:
    struct Entry {
        std::string id;
        nlohmann::json response;
        nlohmann::json input_items;
        std::string previous_id;
        size_t bytes = 0;
        std::chrono::steady_clock::time_point expires;
    };
    using List = std::list<Entry>;  // most recently used first

    std::chrono::steady_clock::time_point now() const;
    // The live entry for `id`, moved to the front; expired ones are dropped on the way.
    Entry* find(const std::string& id);
    void drop(List::iterator it);
    void evict_expired();

    ResponseStoreLimits limits_;
    Clock clock_;
    mutable std::mutex mutex_;
    List entries_;
    std::unordered_map<std::string, List::iterator> index_;
    size_t bytes_ = 0;
};

}  // namespace ggufd::server
