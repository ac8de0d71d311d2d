#include "engine/sampling/stop.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace ggufd::sampling {

namespace {

// An empty stop string would match before any text.
void check_stops(const std::vector<std::string>& stops) {
    for (const std::string& s : stops)
        if (s.empty()) throw InvalidParam("stop", "stop strings must not be empty");
}

}  // namespace

void validate(const StopParams& params) {
    if (params.max_tokens < -1)
        throw InvalidParam("max_tokens", "max_tokens must be >= -1 (-1 means no limit), got " +
                                             std::to_string(params.max_tokens));
    check_stops(params.stop);
}

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
    check_stops(stops_);
    for (const std::string& s : stops_) longest_stop_ = std::max(longest_stop_, s.size());
}

// Length of the longest end of held_ that is the beginning of some stop string (a full stop
// string would already have matched, so only proper beginnings count).
size_t StopMatcher::longest_partial_suffix() const {
    if (longest_stop_ == 0) return 0;
    const std::string_view text(held_);
    for (size_t len = std::min(text.size(), longest_stop_ - 1); len > 0; --len) {
        const std::string_view tail = text.substr(text.size() - len);
        for (const std::string& s : stops_)
            if (s.size() > len && std::string_view(s).substr(0, len) == tail) return len;
    }
    return 0;
}

StopMatcher::Output StopMatcher::push(std::string_view piece) {
    Output out;
    if (stopped()) {
        out.matched = matched_;
        return out;
    }
    held_.append(piece);

    // Everything before held_ was checked already and held_ starts where the longest possible
    // partial match did, so any match now lies within held_.
    size_t best_end = std::string::npos;
    size_t best_start = 0;
    for (size_t i = 0; i < stops_.size(); ++i) {
        const size_t start = held_.find(stops_[i]);
        if (start == std::string::npos) continue;
        const size_t end = start + stops_[i].size();
        if (end < best_end || (end == best_end && start < best_start)) {
            best_end = end;
            best_start = start;
            matched_ = static_cast<int32_t>(i);
        }
    }
    if (matched_ >= 0) {
        out.text = held_.substr(0, best_start);
        out.matched = matched_;
        held_.clear();
        return out;
    }

    const size_t keep = longest_partial_suffix();
    out.text = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopMatcher::flush() {
    std::string out;
    out.swap(held_);
    return out;
}

StopChecker::StopChecker(const StopParams& params, EogPredicate is_eog)
    : params_(params), is_eog_(std::move(is_eog)), matcher_(params.stop) {
    validate(params_);
    if (!is_eog_) throw std::invalid_argument("StopChecker needs an end-of-generation predicate");
}

StopChecker::StopChecker(const StopParams& params, std::vector<int32_t> eog_tokens)
    : StopChecker(params, [ids = std::move(eog_tokens)](int32_t token) {
          return std::find(ids.begin(), ids.end(), token) != ids.end();
      }) {}

bool StopChecker::budget_exhausted() const {
    return params_.max_tokens >= 0 && generated_ >= params_.max_tokens;
}

StopChecker::Step StopChecker::on_token(int32_t token, std::string_view text) {
    if (finished_) throw std::logic_error("StopChecker: the generation has already finished");
    ++generated_;
    Step step;
    if (ends_generation(token)) {
        step.text = matcher_.flush();
        step.reason = StopReason::end_of_generation;
        finished_ = true;
        return step;
    }
    StopMatcher::Output out = matcher_.push(text);
    step.text = std::move(out.text);
    if (out.stopped()) {
        step.reason = StopReason::stop_string;
        step.stop_string = matcher_.stops()[static_cast<size_t>(out.matched)];
        finished_ = true;
    } else if (budget_exhausted()) {
        step.text += matcher_.flush();
        step.reason = StopReason::max_tokens;
        finished_ = true;
    }
    return step;
}

bool StopChecker::ends_generation(int32_t token) const {
    return !params_.ignore_eos && is_eog_(token);
}

std::string StopChecker::finish() {
    finished_ = true;
    return matcher_.flush();
}

}  // namespace ggufd::sampling
