// A Prometheus histogram whose observe() is lock-free: prometheus-cpp's Histogram takes a mutex
// on every Observe(), which we do not want once per generated token. Each bucket is a relaxed
// atomic counter; the sum is an atomic double. Readers (the scrape) may see an observation in its
// bucket before its value reaches the sum, so one scrape's _sum can lag its _count by the
// observations in flight; _count is always exactly the +Inf bucket and buckets never go down.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <prometheus/labels.h>
#include <prometheus/metric_family.h>

namespace ggufd::metrics {

class AtomicHistogram {
  public:
    // `bounds`: strictly increasing finite upper bounds; the +Inf bucket is implicit.
    // Throws std::invalid_argument otherwise.
    explicit AtomicHistogram(std::vector<double> bounds);

    // Wait-free apart from the double add (a short compare-exchange loop). NaN is ignored.
    void observe(double value) noexcept;

    struct Snapshot {
        std::vector<uint64_t> cumulative;  // per bound, then +Inf
        uint64_t count = 0;
        double sum = 0.0;
    };
    Snapshot snapshot() const;
    const std::vector<double>& bounds() const { return bounds_; }

  private:
    std::vector<double> bounds_;
    std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1, not cumulative
    std::atomic<double> sum_{0.0};
};

// Histograms of one name with different label values, collected as one MetricFamily. add()
// takes a mutex and is meant for set-up or once per request; keep the returned reference for
// the hot path (it stays valid as long as the family).
class HistogramFamily {
  public:
    HistogramFamily(std::string name, std::string help, std::vector<double> bounds);

    AtomicHistogram& add(const prometheus::Labels& labels);
    prometheus::MetricFamily collect() const;
    const std::string& name() const { return name_; }

  private:
    std::string name_, help_;
    std::vector<double> bounds_;
    mutable std::mutex mutex_;
    std::map<prometheus::Labels, std::unique_ptr<AtomicHistogram>> children_;
};

}  // namespace ggufd::metrics
