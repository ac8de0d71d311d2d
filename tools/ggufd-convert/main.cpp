// ggufd-convert: model files in other formats to GGUF and back. So far whisper.cpp's ggml `.bin`
// (the models whisper.cpp users have) to the Whisper GGUF ggufd serves, and a Whisper GGUF back
// to the `.bin` whisper.cpp runs.
//
//   ggufd-convert whisper-bin-to-gguf IN.bin OUT.gguf [NAME]
//   ggufd-convert whisper-gguf-to-bin IN.gguf OUT.bin
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/whisper/convert.h"
#include "engine/whisper/model.h"

namespace {

int usage() {
    std::fprintf(stderr,
                 "usage: ggufd-convert whisper-bin-to-gguf IN.bin OUT.gguf [NAME]\n"
                 "       ggufd-convert whisper-gguf-to-bin IN.gguf OUT.bin\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) return usage();
    const std::string command = argv[1];
    try {
        if (command == "whisper-bin-to-gguf") {
            std::ifstream in(argv[2], std::ios::binary);
            if (!in) throw std::runtime_error(std::string("cannot read ") + argv[2]);
            const std::vector<uint8_t> bin{std::istreambuf_iterator<char>(in),
                                           std::istreambuf_iterator<char>()};
            std::string name = argc > 4 ? argv[4] : std::filesystem::path(argv[2]).stem().string();
            const gguf::Writer w = ggufd::whisper::bin_to_gguf(bin, name);
            // Loading the result checks it as the server will.
            ggufd::whisper::Model::from_file(gguf::File::from_bytes(w.to_bytes()));
            w.write(argv[3]);
        } else if (command == "whisper-gguf-to-bin") {
            const auto model = ggufd::whisper::Model::load(argv[2]);
            const std::vector<uint8_t> bin = ggufd::whisper::gguf_to_bin(*model);
            std::ofstream out(argv[3], std::ios::binary);
            out.write(reinterpret_cast<const char*>(bin.data()),
                      static_cast<std::streamsize>(bin.size()));
            if (!out) throw std::runtime_error(std::string("cannot write ") + argv[3]);
        } else {
            return usage();
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ggufd-convert: %s\n", e.what());
        return 1;
    }
    std::fprintf(stderr, "ggufd-convert: wrote %s\n", argv[3]);
    return 0;
}
