// Dispatch overhead of the thread pool: how long one parallel_for takes when the tasks do
// nothing, with workers hot (back-to-back calls, as inside a decode step) and cold (after the
// pool went to sleep), and with a small real workload split in chunks.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "engine/kernels/threadpool.h"

namespace ggufd::kernels {
namespace {

// One empty task per thread, back to back.
void BM_PoolEmptyRoundTrip(benchmark::State& state) {
    ThreadPool pool(static_cast<int>(state.range(0)));
    std::atomic<int64_t> sink{0};
    for (auto _ : state) {
        pool.parallel_for(pool.size(), 1, [&](int64_t begin, int64_t, int) {
            if (begin < 0) sink.fetch_add(1, std::memory_order_relaxed);
        });
    }
    state.counters["threads"] = pool.size();
}
BENCHMARK(BM_PoolEmptyRoundTrip)->Arg(1)->Arg(2)->Arg(4)->UseRealTime();

// The same after the workers have gone to sleep: includes the futex wake-up.
void BM_PoolEmptyRoundTripFromSleep(benchmark::State& state) {
    ThreadPool pool(static_cast<int>(state.range(0)));
    std::atomic<int64_t> sink{0};
    for (auto _ : state) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        const auto start = std::chrono::steady_clock::now();
        pool.parallel_for(pool.size(), 1, [&](int64_t begin, int64_t, int) {
            if (begin < 0) sink.fetch_add(1, std::memory_order_relaxed);
        });
        const auto stop = std::chrono::steady_clock::now();
        state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
    }
}
BENCHMARK(BM_PoolEmptyRoundTripFromSleep)->Arg(2)->UseManualTime()->Iterations(300);

// 64K floats scaled in place, split in chunks: the shape of a small elementwise op.
void BM_PoolSmallWork(benchmark::State& state) {
    ThreadPool pool(static_cast<int>(state.range(0)));
    std::vector<float> data(65536, 1.0f);
    for (auto _ : state) {
        pool.parallel_for(static_cast<int64_t>(data.size()), 4096,
                          [&](int64_t begin, int64_t end, int) {
                              for (int64_t i = begin; i < end; ++i) data[i] *= 1.0000001f;
                          });
        benchmark::DoNotOptimize(data.data());
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(data.size() * sizeof(float)));
}
BENCHMARK(BM_PoolSmallWork)->Arg(1)->Arg(2)->UseRealTime();

}  // namespace
}  // namespace ggufd::kernels
