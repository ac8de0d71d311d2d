#include "server/response_store.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace ggufd::server {

using nlohmann::json;

namespace {

size_t json_bytes(const json& value) {
    return value.dump(-1, ' ', false, json::error_handler_t::replace).size();
}

}  // namespace

ResponseStore::ResponseStore(ResponseStoreLimits limits, Clock clock)
    : limits_(limits), clock_(std::move(clock)) {}

std::chrono::steady_clock::time_point ResponseStore::now() const {
    return clock_ ? clock_() : std::chrono::steady_clock::now();
}

void ResponseStore::drop(List::iterator it) {
    bytes_ -= it->bytes;
    index_.erase(it->id);
    entries_.erase(it);
}

void ResponseStore::evict_expired() {
    const auto t = now();
    for (auto it = entries_.begin(); it != entries_.end();) {
        auto next = std::next(it);
        if (it->expires <= t) drop(it);
        it = next;
    }
}

ResponseStore::Entry* ResponseStore::find(const std::string& id) {
    auto found = index_.find(id);
    if (found == index_.end()) return nullptr;
    List::iterator it = found->second;
    if (it->expires <= now()) {
        drop(it);
        return nullptr;
    }
    entries_.splice(entries_.begin(), entries_, it);
    return &*it;
}

void ResponseStore::put(const json& response, json input_items, const std::string& previous_id) {
    Entry e;
    e.id = response.value("id", std::string());
    e.bytes = json_bytes(response) + json_bytes(input_items) + previous_id.size() + e.id.size();
    if (e.id.empty() || e.bytes > limits_.max_bytes || limits_.max_responses == 0) return;
    e.response = response;
    e.input_items = std::move(input_items);
    e.previous_id = previous_id;
    e.expires = now() + limits_.lifetime;

    std::lock_guard lock(mutex_);
    if (auto old = index_.find(e.id); old != index_.end()) drop(old->second);
    evict_expired();
    while (!entries_.empty() &&
           (entries_.size() >= limits_.max_responses || bytes_ + e.bytes > limits_.max_bytes)) {
        drop(std::prev(entries_.end()));
    }
    bytes_ += e.bytes;
    entries_.push_front(std::move(e));
    index_[entries_.front().id] = entries_.begin();
}

std::optional<json> ResponseStore::get(const std::string& id) {
    std::lock_guard lock(mutex_);
    const Entry* e = find(id);
    if (!e) return std::nullopt;
    return e->response;
}

std::optional<json> ResponseStore::input_items(const std::string& id) {
    std::lock_guard lock(mutex_);
    const Entry* e = find(id);
    if (!e) return std::nullopt;
    return e->input_items;
}

bool ResponseStore::erase(const std::string& id) {
    std::lock_guard lock(mutex_);
    auto found = index_.find(id);
    if (found == index_.end()) return false;
    drop(found->second);
    return true;
}

std::optional<json> ResponseStore::conversation(const std::string& id, std::string* missing) {
    std::lock_guard lock(mutex_);
    std::vector<const Entry*> links;  // newest first
    std::string at = id;
    while (!at.empty()) {
        const Entry* e = find(at);
        if (!e) {
            if (missing) *missing = at;
            return std::nullopt;
        }
        // A chain only ever points to older responses, so it cannot loop; a size bound keeps a
        // corrupted one from spinning anyway.
        if (links.size() > entries_.size()) break;
        links.push_back(e);
        at = e->previous_id;
    }
    json items = json::array();
    for (auto it = links.rbegin(); it != links.rend(); ++it) {
        for (const json& item : (*it)->input_items) items.push_back(item);
        if (const auto output = (*it)->response.find("output"); output != (*it)->response.end()) {
            for (const json& item : *output) items.push_back(item);
        }
    }
    return items;
}

size_t ResponseStore::size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
}

size_t ResponseStore::bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
}

}  // namespace ggufd::server
