// A fixed set of worker threads that the engine's kernels fan out on. A decode step issues a few
// hundred operations of 10-100 us each, so one dispatch must cost a few microseconds at most:
// workers are created once, claim chunks of work through one atomic counter, spin briefly between
// operations and only then sleep on a futex (std::atomic::wait), so an idle pool uses no CPU.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace ggufd::kernels {

// Number of physical cores this process may run on (hyper-threads of one core count once), read
// from /sys/devices/system/cpu/*/topology; std::thread::hardware_concurrency() when unavailable.
int physical_core_count();

class ThreadPool {
  public:
    // n_threads counts the calling thread, which takes part in every parallel_for; 0 picks
    // physical_core_count(). One thread means everything runs inline on the caller.
    explicit ThreadPool(int n_threads = 0);
    ~ThreadPool();

    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    // Threads that run tasks, the caller included; thread indices passed to tasks are < size().
    int size() const { return n_threads_.load(std::memory_order_relaxed); }
    // Threads the pool was built with: the most set_size() allows.
    int capacity() const { return static_cast<int>(workers_.size()) + 1; }
    // Lets only the first n threads (the caller and n - 1 workers) take part in the next
    // dispatches, so one pool serves steps that want different thread counts (a prompt's
    // batch and a decode step, --threads-batch and --threads); the others stay idle.
    // std::invalid_argument unless 1 <= n <= capacity(). Waits for a running dispatch.
    void set_size(int n);

    // Runs fn(begin, end, thread_index) over [0, n_tasks) cut into chunks of `chunk` tasks
    // (the last may be shorter), claimed dynamically by the caller and the workers; returns when
    // every chunk has run. The first exception thrown by fn is rethrown here after the remaining
    // chunks are skipped. Calls from several threads at once are serialised; a call from inside
    // a task (nested) runs inline on that thread with the same thread index.
    template <class F>
    void parallel_for(int64_t n_tasks, int64_t chunk, F&& fn) {
        using Fn = std::remove_reference_t<F>;
        run(n_tasks, chunk, &invoke<Fn>, const_cast<void*>(static_cast<const void*>(&fn)));
    }

    // Same with a chunk size giving each thread about four chunks, which balances uneven rows
    // without making the shared counter hot.
    template <class F>
    void parallel_for(int64_t n_tasks, F&& fn) {
        parallel_for(n_tasks, default_chunk(n_tasks), std::forward<F>(fn));
    }

    // Runs fn(begin, end, thread_index) over [0, n_tasks) cut into pieces that start at
    // multiples of `granule` (a repacked matrix's row group) and differ by at most one granule:
    // a whole multiple of the thread count of them (up to four per thread) when there are
    // enough granules, so no thread is left with an extra piece at the end of an operation.
    template <class F>
    void parallel_for_granules(int64_t n_tasks, int64_t granule, F&& fn) {
        const Pieces p = granule_pieces(n_tasks, granule);
        parallel_for(p.count, 1, [&](int64_t i0, int64_t i1, int thread) {
            for (int64_t i = i0; i < i1; ++i) {
                fn(p.begin(i), p.begin(i + 1), thread);
            }
        });
    }

    // How parallel_for_granules cuts n_tasks: piece i is [begin(i), begin(i + 1)).
    struct Pieces {
        int64_t n_tasks = 0, granule = 1, n_granules = 0, count = 0;
        int64_t begin(int64_t i) const {
            return std::min(n_tasks, i * n_granules / count * granule);
        }
    };
    Pieces granule_pieces(int64_t n_tasks, int64_t granule) const;

    int64_t default_chunk(int64_t n_tasks) const {
        const int64_t pieces = static_cast<int64_t>(size()) * 4;
        return n_tasks <= pieces ? 1 : (n_tasks + pieces - 1) / pieces;
    }

    // Index of the calling thread inside the pool that is running it (0 for outside callers).
    static int current_thread_index();

  private:
    using TaskFn = void (*)(void* ctx, int64_t begin, int64_t end, int thread);

    template <class Fn>
    static void invoke(void* ctx, int64_t begin, int64_t end, int thread) {
        (*static_cast<Fn*>(ctx))(begin, end, thread);
    }

    void run(int64_t n_tasks, int64_t chunk, TaskFn fn, void* ctx);
    void run_inline(int64_t n_tasks, int64_t chunk, TaskFn fn, void* ctx, int thread);
    void worker_main(int thread);
    // Claims and runs chunks of the current job until none is left.
    void work_on(int thread);
    void wait_for_completion(int64_t n_chunks);

    // Threads taking part in dispatches (set_size); read by workers that may claim a chunk.
    std::atomic<int> n_threads_{1};
    std::vector<std::thread> workers_;
    std::mutex dispatch_mutex_;  // one job at a time when several threads call run()

    // The current job. Written only by the dispatching thread before it publishes the claim
    // word; workers read it only after claiming a chunk, and the dispatcher cannot return (and
    // so cannot replace it) before that chunk is counted as done.
    TaskFn job_fn_ = nullptr;
    void* job_ctx_ = nullptr;
    int64_t job_tasks_ = 0;
    int64_t job_chunk_ = 1;

    // Number of chunks of the current job (high 32 bits) and the next chunk to hand out (low 32
    // bits); chunks are claimed by compare-exchange.
    alignas(64) std::atomic<uint64_t> claim_{0};
    // Bumped for every job (and at shutdown); idle workers wait for it to change.
    alignas(64) std::atomic<uint32_t> posted_{0};
    alignas(64) std::atomic<int64_t> chunks_done_{0};
    alignas(64) std::atomic<int> sleeping_workers_{0};
    std::atomic<bool> caller_sleeping_{false};
    std::atomic<bool> failed_{false};
    std::atomic<bool> stopping_{false};
    std::exception_ptr error_;  // set once per job, by whoever flips failed_
};

}  // namespace ggufd::kernels
