#include "engine/kernels/threadpool.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/kernels/cpu_topology.h"

namespace ggufd::kernels {
namespace {

// Runs parallel_for and checks every task ran exactly once with a valid thread index.
void expect_each_task_once(ThreadPool& pool, int64_t n, int64_t chunk) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<int> bad_thread{0};
    std::atomic<int> bad_range{0};
    pool.parallel_for(n, chunk, [&](int64_t begin, int64_t end, int thread) {
        if (thread < 0 || thread >= pool.size()) bad_thread.fetch_add(1);
        if (begin < 0 || end > n || begin >= end || (chunk > 0 && end - begin > chunk)) {
            bad_range.fetch_add(1);
            return;
        }
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    EXPECT_EQ(bad_thread.load(), 0);
    EXPECT_EQ(bad_range.load(), 0);
    for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "task " << i << " of " << n;
    }
}

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
    for (int threads : {1, 2, 3, 4}) {
        ThreadPool pool(threads);
        ASSERT_EQ(pool.size(), threads);
        for (int64_t n : {1, 2, 3, 7, 64, 100, 1000, 4099}) {
            for (int64_t chunk : {0, 1, 3, 64, 5000}) {
                SCOPED_TRACE("threads=" + std::to_string(threads) + " n=" + std::to_string(n) +
                             " chunk=" + std::to_string(chunk));
                expect_each_task_once(pool, n, chunk);
            }
        }
    }
}

TEST(ThreadPool, GranulePiecesAreAlignedBalancedAndCoverOnce) {
    for (int threads : {1, 2, 3, 16}) {
        ThreadPool pool(threads);
        for (int64_t n : {1, 15, 16, 17, 100, 2560, 11264, 32000, 4099}) {
            for (int64_t granule : {1, 16}) {
                SCOPED_TRACE("threads=" + std::to_string(threads) + " n=" + std::to_string(n) +
                             " granule=" + std::to_string(granule));
                const ThreadPool::Pieces p = pool.granule_pieces(n, granule);
                const int64_t granules = (n + granule - 1) / granule;
                // Enough granules: a whole multiple of the threads, at most four pieces each.
                if (granules >= threads) {
                    EXPECT_EQ(p.count % threads, 0);
                    EXPECT_LE(p.count, 4 * threads);
                } else {
                    EXPECT_EQ(p.count, granules);
                }
                int64_t smallest = n, largest = 0;
                for (int64_t i = 0; i < p.count; ++i) {
                    const int64_t b = p.begin(i), e = p.begin(i + 1);
                    EXPECT_EQ(b % granule, 0) << i;
                    EXPECT_LT(b, e) << i;
                    if (e < n) {  // the last piece may end on a partial granule
                        smallest = std::min(smallest, (e - b) / granule);
                        largest = std::max(largest, (e - b) / granule);
                    }
                }
                EXPECT_EQ(p.begin(0), 0);
                EXPECT_EQ(p.begin(p.count), n);
                if (largest > 0) {
                    EXPECT_LE(largest - smallest, 1);
                }
                std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
                pool.parallel_for_granules(n, granule, [&](int64_t b, int64_t e, int) {
                    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
                });
                for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1);
            }
        }
    }
    ThreadPool pool(2);
    EXPECT_THROW(pool.granule_pieces(10, 0), std::invalid_argument);
}

TEST(ThreadPool, EmptyRangeDoesNothing) {
    ThreadPool pool(2);
    int calls = 0;
    pool.parallel_for(0, [&](int64_t, int64_t, int) { ++calls; });
    pool.parallel_for(-5, [&](int64_t, int64_t, int) { ++calls; });
    EXPECT_EQ(calls, 0);
}

TEST(ThreadPool, SingleChunkRunsOnTheCaller) {
    ThreadPool pool(3);
    const auto caller = std::this_thread::get_id();
    std::thread::id ran_on;
    int index = -1;
    pool.parallel_for(10, 10, [&](int64_t, int64_t, int thread) {
        ran_on = std::this_thread::get_id();
        index = thread;
    });
    EXPECT_EQ(ran_on, caller);
    EXPECT_EQ(index, 0);
}

TEST(ThreadPool, WorkersShareTheWork) {
    // With tasks that wait until two distinct threads have started, the job can only finish if
    // at least one worker takes part besides the caller.
    ThreadPool pool(2);
    std::atomic<int> started{0};
    std::vector<std::atomic<int>> by_thread(2);
    pool.parallel_for(2, 1, [&](int64_t, int64_t, int thread) {
        by_thread[static_cast<size_t>(thread)].fetch_add(1);
        started.fetch_add(1);
        while (started.load() < 2) std::this_thread::yield();
    });
    EXPECT_EQ(by_thread[0].load(), 1);
    EXPECT_EQ(by_thread[1].load(), 1);
}

// The threads that run a dispatch of many tasks, each task waiting (up to a deadline shared by
// all) until `expected` distinct threads have joined, so every thread allowed in gets the chance.
std::set<std::thread::id> threads_running(ThreadPool& pool, size_t expected) {
    std::mutex m;
    std::set<std::thread::id> seen;
    std::atomic<int> bad_index{0};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    pool.parallel_for(64, 1, [&](int64_t, int64_t, int thread) {
        if (thread >= pool.size()) bad_index.fetch_add(1);
        {
            std::lock_guard lock(m);
            seen.insert(std::this_thread::get_id());
        }
        for (;;) {
            {
                std::lock_guard lock(m);
                if (seen.size() >= expected) break;
            }
            if (std::chrono::steady_clock::now() > deadline) break;
            std::this_thread::yield();
        }
    });
    EXPECT_EQ(bad_index.load(), 0);
    return seen;
}

TEST(ThreadPool, SetSizeLimitsTheThreadsOfADispatch) {
    ThreadPool pool(4);
    EXPECT_EQ(pool.capacity(), 4);
    for (int n : {2, 1, 4, 3}) {
        pool.set_size(n);
        EXPECT_EQ(pool.size(), n);
        // Every allowed thread joins (the tasks wait for them), and none beyond: a leaking worker
        // would also show as a thread index >= size().
        EXPECT_EQ(threads_running(pool, static_cast<size_t>(n)).size(), static_cast<size_t>(n))
            << n << " threads";
        expect_each_task_once(pool, 1000, 7);
    }
    EXPECT_THROW(pool.set_size(0), std::invalid_argument);
    EXPECT_THROW(pool.set_size(5), std::invalid_argument);
    EXPECT_EQ(pool.size(), 3);
}

TEST(ThreadPool, SumsManySmallJobsCorrectly) {
    // Many back-to-back dispatches: the pattern of a decode step, and the one where a worker
    // still finishing job k could race with job k+1 being posted.
    ThreadPool pool(3);
    for (int round = 0; round < 3000; ++round) {
        const int64_t n = 1 + round % 97;
        std::atomic<int64_t> sum{0};
        pool.parallel_for(n, 1 + round % 5, [&](int64_t begin, int64_t end, int) {
            int64_t local = 0;
            for (int64_t i = begin; i < end; ++i) local += i + 1;
            sum.fetch_add(local);
        });
        ASSERT_EQ(sum.load(), n * (n + 1) / 2) << "round " << round;
    }
}

TEST(ThreadPool, PropagatesExceptionsAndStaysUsable) {
    ThreadPool pool(3);
    for (int attempt = 0; attempt < 20; ++attempt) {
        std::atomic<int> ran{0};
        try {
            pool.parallel_for(100, 1, [&](int64_t begin, int64_t, int) {
                ran.fetch_add(1);
                if (begin == 37) throw std::runtime_error("task 37 failed");
            });
            FAIL() << "no exception";
        } catch (const std::runtime_error& e) {
            EXPECT_STREQ(e.what(), "task 37 failed");
        }
        EXPECT_GE(ran.load(), 1);
        expect_each_task_once(pool, 500, 7);
    }
}

TEST(ThreadPool, ExceptionFromSingleThreadPool) {
    ThreadPool pool(1);
    EXPECT_THROW(pool.parallel_for(10, [](int64_t, int64_t, int) { throw std::logic_error("x"); }),
                 std::logic_error);
}

TEST(ThreadPool, NestedCallsRunInline) {
    ThreadPool pool(3);
    std::vector<std::atomic<int>> hits(50 * 20);
    std::atomic<int> wrong_thread{0};
    pool.parallel_for(50, 1, [&](int64_t begin, int64_t end, int outer_thread) {
        for (int64_t i = begin; i < end; ++i) {
            pool.parallel_for(20, 3, [&](int64_t b, int64_t e, int inner_thread) {
                if (inner_thread != outer_thread) wrong_thread.fetch_add(1);
                for (int64_t j = b; j < e; ++j) hits[static_cast<size_t>(i * 20 + j)].fetch_add(1);
            });
        }
    });
    EXPECT_EQ(wrong_thread.load(), 0);
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, ConcurrentCallersAreSerialisedCorrectly) {
    ThreadPool pool(2);
    std::vector<std::thread> callers;
    std::atomic<int> failures{0};
    for (int c = 0; c < 4; ++c) {
        callers.emplace_back([&, c] {
            for (int round = 0; round < 200; ++round) {
                const int64_t n = 10 + (round * 7 + c) % 300;
                std::atomic<int64_t> sum{0};
                pool.parallel_for(n, 4, [&](int64_t begin, int64_t end, int) {
                    for (int64_t i = begin; i < end; ++i) sum.fetch_add(i);
                });
                if (sum.load() != n * (n - 1) / 2) failures.fetch_add(1);
            }
        });
    }
    for (auto& t : callers) t.join();
    EXPECT_EQ(failures.load(), 0);
}

TEST(ThreadPool, CurrentThreadIndexMatchesTheTaskArgument) {
    ThreadPool pool(3);
    std::atomic<int> mismatches{0};
    pool.parallel_for(300, 1, [&](int64_t, int64_t, int thread) {
        if (ThreadPool::current_thread_index() != thread) mismatches.fetch_add(1);
    });
    EXPECT_EQ(mismatches.load(), 0);
    EXPECT_EQ(ThreadPool::current_thread_index(), 0);
}

TEST(ThreadPool, CreateAndDestroyRepeatedly) {
    // Shutdown must join both spinning and sleeping workers, and a pool destroyed right after a
    // job must not leave a worker touching it.
    for (int i = 0; i < 50; ++i) {
        ThreadPool pool(1 + i % 4);
        if (i % 2 == 0) expect_each_task_once(pool, 33, 2);
        if (i % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

TEST(ThreadPool, RejectsNegativeThreadCount) {
    EXPECT_THROW(ThreadPool(-1), std::invalid_argument);
}

TEST(ThreadPool, DefaultSizeIsPhysicalCores) {
    const int cores = physical_core_count();
    EXPECT_GE(cores, 1);
    const unsigned hw = std::thread::hardware_concurrency();
    if (hw > 0) {
        EXPECT_LE(cores, static_cast<int>(hw));
    }
    ThreadPool pool;
    EXPECT_EQ(pool.size(), cores);
}

// A fake /sys/devices/system/cpu and cgroup directory: `cores[cpu]` is (package, core) of cpu.
class FakeMachine {
  public:
    explicit FakeMachine(const std::vector<std::pair<int, int>>& cores)
        : root_(std::filesystem::temp_directory_path() /
                ("ggufd-cpus-" + std::to_string(getpid()) + "-" + std::to_string(counter_++))) {
        for (size_t cpu = 0; cpu < cores.size(); ++cpu) {
            const auto dir = root_ / "cpu" / ("cpu" + std::to_string(cpu)) / "topology";
            std::filesystem::create_directories(dir);
            std::ofstream(dir / "physical_package_id") << cores[cpu].first << "\n";
            std::ofstream(dir / "core_id") << cores[cpu].second << "\n";
        }
        std::filesystem::create_directories(root_ / "cgroup");
    }
    ~FakeMachine() { std::filesystem::remove_all(root_); }
    void cgroup_file(const std::string& name, const std::string& text) const {
        std::filesystem::create_directories((root_ / "cgroup" / name).parent_path());
        std::ofstream(root_ / "cgroup" / name) << text;
    }
    int cores(const std::vector<int>& allowed = {}) const {
        return physical_core_count(allowed, (root_ / "cpu").string(), (root_ / "cgroup").string());
    }

  private:
    static inline int counter_ = 0;
    std::filesystem::path root_;
};

TEST(PhysicalCores, HyperThreadsOfOneCoreCountOnce) {
    // Two packages of two cores, each with two hyper-threads: cpus 0-3 on package 0 (cores 0, 1,
    // siblings 2, 3), cpus 4-7 on package 1 with the same core ids.
    const FakeMachine m({{0, 0}, {0, 1}, {0, 0}, {0, 1}, {1, 0}, {1, 1}, {1, 0}, {1, 1}});
    EXPECT_EQ(m.cores(), 4);
    EXPECT_EQ(m.cores({0, 2}), 1);        // one core's two threads
    EXPECT_EQ(m.cores({0, 1, 2, 3}), 2);  // one package
    EXPECT_EQ(m.cores({0, 4}), 2);        // same core id, different packages
    EXPECT_EQ(m.cores({1, 9}), 1);        // a CPU sysfs does not list is skipped
}

TEST(PhysicalCores, CgroupQuotaCapsTheCount) {
    const FakeMachine m({{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}});
    m.cgroup_file("cpu.max", "max 100000\n");
    EXPECT_EQ(m.cores(), 6);
    m.cgroup_file("cpu.max", "250000 100000\n");  // 2.5 CPUs: 3 threads
    EXPECT_EQ(m.cores(), 3);
    EXPECT_EQ(m.cores({0, 1}), 2);               // the mask is smaller still
    m.cgroup_file("cpu.max", "20000 100000\n");  // a fifth of a CPU still runs one thread
    EXPECT_EQ(m.cores(), 1);
    m.cgroup_file("cpu.max", "900000 100000\n");  // more than the machine has
    EXPECT_EQ(m.cores(), 6);
    m.cgroup_file("cpu.max", "garbage\n");
    EXPECT_EQ(m.cores(), 6);
}

TEST(PhysicalCores, CgroupV1Quota) {
    const FakeMachine m({{0, 0}, {0, 1}, {0, 2}, {0, 3}});
    m.cgroup_file("cpu/cpu.cfs_quota_us", "-1\n");
    m.cgroup_file("cpu/cpu.cfs_period_us", "100000\n");
    EXPECT_EQ(m.cores(), 4);
    m.cgroup_file("cpu/cpu.cfs_quota_us", "200000\n");
    EXPECT_EQ(m.cores(), 2);
}

TEST(PhysicalCores, UnreadableTopologyFallsBackToHardwareThreads) {
    const FakeMachine m({});
    const unsigned hw = std::thread::hardware_concurrency();
    EXPECT_EQ(m.cores(), hw == 0 ? 1 : static_cast<int>(hw));
}

// States ('R', 'S', ...) of this process's threads other than the calling one.
std::vector<char> other_thread_states() {
    std::vector<char> states;
    const long self = syscall(SYS_gettid);
    DIR* dir = opendir("/proc/self/task");
    if (!dir) return states;
    while (dirent* entry = readdir(dir)) {
        const std::string name = entry->d_name;
        if (name == "." || name == ".." || std::stol(name) == self) continue;
        std::ifstream stat("/proc/self/task/" + name + "/stat");
        std::string line;
        std::getline(stat, line);
        const auto paren = line.rfind(')');
        if (paren != std::string::npos && paren + 2 < line.size())
            states.push_back(line[paren + 2]);
    }
    closedir(dir);
    return states;
}

TEST(ThreadPool, IdleWorkersStopSpinning) {
    if (DIR* dir = opendir("/proc/self/task")) {
        closedir(dir);
    } else {
        GTEST_SKIP() << "no /proc/self/task";
    }
    const size_t before = other_thread_states().size();
    ThreadPool pool(3);
    expect_each_task_once(pool, 100, 1);
    // Workers spin for a fraction of a millisecond and then sleep; allow ample time for that.
    bool all_asleep = false;
    for (int i = 0; i < 1000 && !all_asleep; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        const auto states = other_thread_states();
        int sleeping = 0;
        for (char s : states) sleeping += s == 'S';
        all_asleep = states.size() == before + 2 && sleeping == static_cast<int>(states.size());
    }
    EXPECT_TRUE(all_asleep);
    expect_each_task_once(pool, 100, 1);  // and they wake up again
}

}  // namespace
}  // namespace ggufd::kernels
