// How many threads the machine gives this process: the parts of physical_core_count()
// (threadpool.h) that read the system, over roots that tests can replace with fake trees.
#pragma once

#include <string>
#include <vector>

namespace ggufd::kernels {

// Physical cores among allowed_cpus (empty: every CPU the sysfs tree lists), hyper-threads of one
// core counted once by (physical_package_id, core_id) under sysfs_cpu_dir/cpuN/topology/, and at
// most the CPUs the cgroup's quota grants, rounded up (cgroup_dir/cpu.max, or cgroup v1's
// cpu.cfs_quota_us / cpu.cfs_period_us in cgroup_dir/cpu or cgroup_dir): a container limited to
// 2.5 CPUs on a 16-core host runs 3 threads rather than 16 that the quota would throttle.
// std::thread::hardware_concurrency() (still capped by the quota) when no topology is readable.
int physical_core_count(const std::vector<int>& allowed_cpus, const std::string& sysfs_cpu_dir,
                        const std::string& cgroup_dir);

}  // namespace ggufd::kernels
