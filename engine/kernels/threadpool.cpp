#include "engine/kernels/threadpool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "engine/kernels/cpu_topology.h"

namespace ggufd::kernels {

namespace {

// How long an idle thread keeps polling before it sleeps. Long enough to bridge the gap between
// two operations of one decode step (so a dispatch costs no futex wake-up), short enough that an
// idle pool stops using the CPU almost at once.
constexpr auto kSpinTime = std::chrono::microseconds(200);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// Polls `done` until it returns true or the spin budget runs out; true when it came true.
template <class Done>
bool spin_until(Done&& done) {
    const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
    for (uint32_t i = 0;; ++i) {
        if (done()) return true;
        cpu_relax();
        if ((i & 63) == 63 && std::chrono::steady_clock::now() >= deadline) return done();
    }
}

// The pool whose task the current thread is running, and that thread's index in it.
thread_local const ThreadPool* tl_pool = nullptr;
thread_local int tl_thread = 0;

// Marks the current thread as running tasks of `pool` for the duration of a scope.
class ScopedPoolThread {
  public:
    ScopedPoolThread(const ThreadPool* pool, int thread)
        : saved_pool_(std::exchange(tl_pool, pool)),
          saved_thread_(std::exchange(tl_thread, thread)) {}
    ~ScopedPoolThread() {
        tl_pool = saved_pool_;
        tl_thread = saved_thread_;
    }
    ScopedPoolThread(const ScopedPoolThread&) = delete;
    ScopedPoolThread& operator=(const ScopedPoolThread&) = delete;

  private:
    const ThreadPool* saved_pool_;
    int saved_thread_;
};

bool read_int(const std::string& path, long& out) {
    std::ifstream in(path);
    return static_cast<bool>(in >> out);
}

constexpr uint64_t kIndexMask = 0xffffffffu;
constexpr int64_t kMaxChunks = int64_t{1} << 31;

}  // namespace

int physical_core_count() {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
        for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
            if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
        }
    }
    return physical_core_count(cpus, "/sys/devices/system/cpu", "/sys/fs/cgroup");
}

namespace {

// CPUs the cgroup's quota grants, rounded up; 0 when there is no quota (or none is readable).
int cgroup_cpu_limit(const std::string& cgroup_dir) {
    double quota = -1, period = 0;
    std::ifstream v2(cgroup_dir + "/cpu.max");  // "QUOTA PERIOD" or "max PERIOD"
    std::string quota_text;
    if (v2 >> quota_text >> period) {
        if (quota_text == "max") return 0;
        try {
            quota = std::stod(quota_text);
        } catch (const std::exception&) {
            return 0;
        }
    } else {
        long q = -1, p = 0;
        for (const std::string& dir : {cgroup_dir + "/cpu", cgroup_dir}) {
            if (read_int(dir + "/cpu.cfs_quota_us", q) && read_int(dir + "/cpu.cfs_period_us", p)) {
                break;
            }
        }
        quota = static_cast<double>(q);  // -1: no quota
        period = static_cast<double>(p);
    }
    if (quota <= 0 || period <= 0) return 0;
    return std::max(1, static_cast<int>(std::ceil(quota / period - 1e-9)));
}

}  // namespace

int physical_core_count(const std::vector<int>& allowed_cpus, const std::string& sysfs_cpu_dir,
                        const std::string& cgroup_dir) {
    std::set<std::pair<long, long>> cores;  // (package, core)
    const bool have_mask = !allowed_cpus.empty();
    const int n_candidates = have_mask ? static_cast<int>(allowed_cpus.size()) : CPU_SETSIZE;
    for (int i = 0; i < n_candidates; ++i) {
        const int cpu = have_mask ? allowed_cpus[static_cast<size_t>(i)] : i;
        const std::string dir = sysfs_cpu_dir + "/cpu" + std::to_string(cpu) + "/topology/";
        long core = 0, package = 0;
        if (!read_int(dir + "core_id", core) || !read_int(dir + "physical_package_id", package)) {
            if (!have_mask) break;  // without a mask, the first missing cpu ends the list
            continue;
        }
        cores.emplace(package, core);
    }
    int count = static_cast<int>(cores.size());
    if (count == 0) {
        const unsigned hw = std::thread::hardware_concurrency();
        count = hw == 0 ? 1 : static_cast<int>(hw);
    }
    const int limit = cgroup_cpu_limit(cgroup_dir);
    return limit > 0 ? std::min(count, limit) : count;
}

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads < 0) throw std::invalid_argument("ThreadPool: negative thread count");
    const int n = n_threads == 0 ? physical_core_count() : n_threads;
    n_threads_.store(n, std::memory_order_relaxed);
    workers_.reserve(static_cast<size_t>(n - 1));
    for (int t = 1; t < n; ++t) workers_.emplace_back([this, t] { worker_main(t); });
}

void ThreadPool::set_size(int n) {
    if (n < 1 || n > capacity()) {
        throw std::invalid_argument("ThreadPool::set_size: " + std::to_string(n) +
                                    " threads, the pool has " + std::to_string(capacity()));
    }
    // Between dispatches only: a dispatch's chunks are cut for the count it started with. The
    // store is published to workers by the release of the next job's claim word.
    std::lock_guard lock(dispatch_mutex_);
    n_threads_.store(n, std::memory_order_seq_cst);
    n_threads_.notify_all();  // wakes the workers parked beyond the old count
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(dispatch_mutex_);  // let a running job finish first
        stopping_.store(true, std::memory_order_relaxed);
        posted_.fetch_add(1, std::memory_order_seq_cst);
        posted_.notify_all();
        // Parked workers (beyond set_size's count) wait for the count to change.
        n_threads_.store(capacity() + 1, std::memory_order_seq_cst);
        n_threads_.notify_all();
    }
    for (auto& w : workers_) w.join();
}

int ThreadPool::current_thread_index() {
    return tl_pool ? tl_thread : 0;
}

void ThreadPool::run_inline(int64_t n_tasks, int64_t chunk, TaskFn fn, void* ctx, int thread) {
    for (int64_t begin = 0; begin < n_tasks; begin += chunk) {
        fn(ctx, begin, std::min(n_tasks, begin + chunk), thread);
    }
}

ThreadPool::Pieces ThreadPool::granule_pieces(int64_t n_tasks, int64_t granule) const {
    if (granule < 1) throw std::invalid_argument("parallel_for_granules: granule must be >= 1");
    Pieces p;
    p.n_tasks = std::max<int64_t>(n_tasks, 0);
    p.granule = granule;
    p.n_granules = (p.n_tasks + granule - 1) / granule;
    const int64_t threads = size();
    p.count = p.n_granules <= threads ? p.n_granules
                                      : threads * std::min<int64_t>(4, p.n_granules / threads);
    return p;
}

void ThreadPool::run(int64_t n_tasks, int64_t chunk, TaskFn fn, void* ctx) {
    if (n_tasks <= 0) return;
    if (chunk <= 0) chunk = default_chunk(n_tasks);
    // The claim word holds the chunk count and index in 32 bits each.
    chunk = std::max(chunk, (n_tasks + kMaxChunks - 1) / kMaxChunks);
    const int64_t n_chunks = (n_tasks + chunk - 1) / chunk;

    if (tl_pool == this) {  // nested call from one of our own tasks
        run_inline(n_tasks, chunk, fn, ctx, tl_thread);
        return;
    }
    if (size() == 1 || n_chunks == 1) {
        ScopedPoolThread as_caller(this, 0);
        run_inline(n_tasks, chunk, fn, ctx, 0);
        return;
    }

    std::lock_guard lock(dispatch_mutex_);
    ScopedPoolThread as_caller(this, 0);
    job_fn_ = fn;
    job_ctx_ = ctx;
    job_tasks_ = n_tasks;
    job_chunk_ = chunk;
    chunks_done_.store(0, std::memory_order_relaxed);
    failed_.store(false, std::memory_order_relaxed);
    error_ = nullptr;
    // Publishing the claim word releases the job fields above to whoever claims a chunk.
    claim_.store(static_cast<uint64_t>(n_chunks) << 32, std::memory_order_release);
    posted_.fetch_add(1, std::memory_order_seq_cst);
    if (sleeping_workers_.load(std::memory_order_seq_cst) > 0) posted_.notify_all();

    work_on(0);
    wait_for_completion(n_chunks);

    if (failed_.load(std::memory_order_acquire)) {
        std::exception_ptr error = std::exchange(error_, nullptr);
        std::rethrow_exception(error);
    }
}

void ThreadPool::work_on(int thread) {
    uint64_t claim = claim_.load(std::memory_order_acquire);
    for (;;) {
        // Everything needed to decide whether a chunk is left is in the claim word itself, so
        // a thread that still holds the word of a finished job can at worst claim a chunk of the
        // current one, which is then a genuine claim: its job fields are published by the
        // release store of the word, and cannot change until that chunk is counted as done.
        const uint64_t n_chunks = claim >> 32;
        const uint64_t index = claim & kIndexMask;
        if (index >= n_chunks) return;
        // A worker beyond the job's thread count claims nothing. The count was stored before
        // the claim word just acquired, so a worker still looping from an earlier job sees the
        // count of the job whose word it holds.
        if (thread >= n_threads_.load(std::memory_order_relaxed)) return;
        if (!claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
            continue;
        }
        const int64_t begin = static_cast<int64_t>(index) * job_chunk_;
        const int64_t end = std::min(job_tasks_, begin + job_chunk_);
        if (!failed_.load(std::memory_order_relaxed)) {
            try {
                job_fn_(job_ctx_, begin, end, thread);
            } catch (...) {
                if (!failed_.exchange(true, std::memory_order_acq_rel)) {
                    error_ = std::current_exception();
                }
            }
        }
        // Once the last chunk is counted the dispatcher may return and post another job, so no
        // job field may be read past this point.
        const uint64_t done = static_cast<uint64_t>(chunks_done_.fetch_add(1) + 1);
        if (done == n_chunks) {
            if (caller_sleeping_.load(std::memory_order_seq_cst)) chunks_done_.notify_all();
            return;
        }
        claim = claim_.load(std::memory_order_acquire);
    }
}

void ThreadPool::wait_for_completion(int64_t n_chunks) {
    auto finished = [&] { return chunks_done_.load(std::memory_order_acquire) == n_chunks; };
    if (spin_until(finished)) return;
    caller_sleeping_.store(true, std::memory_order_seq_cst);
    for (;;) {
        const int64_t done = chunks_done_.load(std::memory_order_seq_cst);
        if (done == n_chunks) break;
        chunks_done_.wait(done, std::memory_order_seq_cst);
    }
    caller_sleeping_.store(false, std::memory_order_relaxed);
}

void ThreadPool::worker_main(int thread) {
    ScopedPoolThread as_worker(this, thread);
    uint32_t seen = 0;
    for (;;) {
        // A worker beyond the thread count (set_size) neither spins nor is woken by the jobs it
        // would not take part in: it sleeps until the count changes.
        for (int n = n_threads_.load(std::memory_order_seq_cst); thread >= n;
             n = n_threads_.load(std::memory_order_seq_cst)) {
            n_threads_.wait(n, std::memory_order_seq_cst);
        }
        auto posted = [&] { return posted_.load(std::memory_order_acquire) != seen; };
        if (!spin_until(posted)) {
            sleeping_workers_.fetch_add(1, std::memory_order_seq_cst);
            posted_.wait(seen, std::memory_order_seq_cst);
            while (posted_.load(std::memory_order_seq_cst) == seen) {
                posted_.wait(seen, std::memory_order_seq_cst);
            }
            sleeping_workers_.fetch_sub(1, std::memory_order_relaxed);
        }
        // Take the post count before looking at stopping_: the other order can swallow the
        // destructor's final post (seen jumps past it) and leave this worker waiting forever.
        seen = posted_.load(std::memory_order_acquire);
        if (stopping_.load(std::memory_order_acquire)) return;
        work_on(thread);
    }
}

}  // namespace ggufd::kernels
