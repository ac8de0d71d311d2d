#include "tools/ggufd-bench/image_mode.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "engine/kernels/threadpool.h"
#include "engine/vision/encoder.h"
#include "engine/vision/image.h"
#include "engine/vision/projector.h"
#include "tools/ggufd-bench/stats.h"

namespace ggufd::bench {

void run_image(const ImageOptions& opt) {
    const auto projector = vision::Projector::load(opt.mmproj_path);
    if (opt.csv) std::printf("image,width,height,threads,tokens,ms_median,ms_min,ms_max\n");
    for (const std::string& path : opt.images) {
        std::ifstream in(path, std::ios::binary);
        if (!in) throw std::runtime_error("cannot read " + path);
        const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in),
                                         std::istreambuf_iterator<char>()};
        const vision::Image image = vision::decode_image(bytes);
        for (int t : opt.threads) {
            kernels::ThreadPool pool(t);
            // One untimed encode first: page faults on the weights and the pool's first wake.
            const int64_t tokens = vision::encode_image(*projector, image, pool).n_tokens();
            std::vector<double> ms;
            for (int r = 0; r < opt.reps; ++r) {
                const auto t0 = std::chrono::steady_clock::now();
                vision::encode_image(*projector, image, pool);
                ms.push_back(
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count());
            }
            const Spread s = spread(ms);
            if (opt.csv) {
                std::printf("%s,%d,%d,%d,%lld,%.1f,%.1f,%.1f\n", path.c_str(), image.width,
                            image.height, pool.size(), static_cast<long long>(tokens), s.median,
                            s.min, s.max);
            } else {
                std::printf(
                    "%s (%d x %d), %d threads: %lld tokens in %.1f ms (min %.1f, max %.1f)\n",
                    path.c_str(), image.width, image.height, pool.size(),
                    static_cast<long long>(tokens), s.median, s.min, s.max);
            }
        }
    }
}

}  // namespace ggufd::bench
