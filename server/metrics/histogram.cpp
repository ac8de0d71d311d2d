#include "server/metrics/histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ggufd::metrics {

AtomicHistogram::AtomicHistogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
    for (size_t i = 0; i < bounds_.size(); ++i) {
        if (!std::isfinite(bounds_[i]))
            throw std::invalid_argument("histogram bucket bound is not finite");
        if (i > 0 && !(bounds_[i] > bounds_[i - 1]))
            throw std::invalid_argument("histogram bucket bounds must be strictly increasing");
    }
    counts_ = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1);
    for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void AtomicHistogram::observe(double value) noexcept {
    if (std::isnan(value)) return;
    // Prometheus buckets are "less than or equal": the first bound >= value.
    const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);
    counts_[static_cast<size_t>(it - bounds_.begin())].fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(value, std::memory_order_relaxed);
}

AtomicHistogram::Snapshot AtomicHistogram::snapshot() const {
    Snapshot s;
    s.cumulative.reserve(bounds_.size() + 1);
    uint64_t running = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
        running += counts_[i].load(std::memory_order_relaxed);
        s.cumulative.push_back(running);
    }
    s.count = running;
    s.sum = sum_.load(std::memory_order_relaxed);
    return s;
}

HistogramFamily::HistogramFamily(std::string name, std::string help, std::vector<double> bounds)
    : name_(std::move(name)), help_(std::move(help)), bounds_(std::move(bounds)) {
    AtomicHistogram check(bounds_);  // reject bad bounds at construction, not at first add()
}

AtomicHistogram& HistogramFamily::add(const prometheus::Labels& labels) {
    std::lock_guard lock(mutex_);
    auto& child = children_[labels];
    if (!child) child = std::make_unique<AtomicHistogram>(bounds_);
    return *child;
}

prometheus::MetricFamily HistogramFamily::collect() const {
    prometheus::MetricFamily family;
    family.name = name_;
    family.help = help_;
    family.type = prometheus::MetricType::Histogram;
    std::lock_guard lock(mutex_);
    for (const auto& [labels, child] : children_) {
        const auto snap = child->snapshot();
        prometheus::ClientMetric m;
        for (const auto& [k, v] : labels) m.label.push_back({k, v});
        m.histogram.sample_count = snap.count;
        m.histogram.sample_sum = snap.sum;
        for (size_t i = 0; i < bounds_.size(); ++i)
            m.histogram.bucket.push_back({snap.cumulative[i], bounds_[i]});
        m.histogram.bucket.push_back({snap.count, std::numeric_limits<double>::infinity()});
        family.metric.push_back(std::move(m));
    }
    return family;
}

}  // namespace ggufd::metrics
