// Image mode: how long a projector (mmproj) takes to turn one picture into a text model's input
// rows (preprocessing, the vision tower, the projection), as llama-mtmd-cli's "image slice
// encoded in" lines report it.
#pragma once

#include <string>
#include <vector>

namespace ggufd::bench {

struct ImageOptions {
    std::string mmproj_path;
    std::vector<std::string> images;
    std::vector<int> threads = {0};
    int reps = 3;
    bool csv = false;
};

void run_image(const ImageOptions& opt);

}  // namespace ggufd::bench
