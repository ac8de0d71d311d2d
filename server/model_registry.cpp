#include <algorithm>
#include <stdexcept>

#include "server/model_backend.h"

namespace ggufd::server {

void ModelRegistry::add(std::shared_ptr<ModelBackend> backend) {
    if (!backend) throw std::invalid_argument("ModelRegistry::add: null backend");
    std::string name = backend->name();
    if (name.empty()) throw std::invalid_argument("ModelRegistry::add: a model needs a name");
    if (by_name_.count(name)) {
        throw std::invalid_argument("ModelRegistry::add: two models are named '" + name + "'");
    }
    by_name_[name] = entries_.size();
    entries_.push_back({std::move(backend), std::time(nullptr)});
}

ModelBackend* ModelRegistry::find(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : entries_[it->second].backend.get();
}

ModelBackend* ModelRegistry::default_model() const {
    // With several configured models a request names one, even when only one of them loaded.
    return entries_.size() == 1 && failed_.empty() ? entries_.front().backend.get() : nullptr;
}

void ModelRegistry::add_failed(const std::string& name) {
    failed_.push_back(name);
}

bool ModelRegistry::is_failed(const std::string& name) const {
    return std::find(failed_.begin(), failed_.end(), name) != failed_.end();
}

std::vector<ModelBackend*> ModelRegistry::all() const {
    std::vector<ModelBackend*> out;
    for (const auto& e : entries_) out.push_back(e.backend.get());
    return out;
}

std::time_t ModelRegistry::created(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? 0 : entries_[it->second].created;
}

bool ModelRegistry::all_ready() const {
    if (entries_.empty()) return false;
    for (const auto& e : entries_) {
        if (!e.backend->is_ready()) return false;
    }
    return true;
}

}  // namespace ggufd::server
