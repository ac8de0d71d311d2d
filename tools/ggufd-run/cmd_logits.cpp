// ggufd-run logits --model M --tokens-file F --out OUT.f32
// Evaluates the ids in F (one a line) as one batch at positions 0.. and writes every position's
// logits as little-endian float32 rows of n_vocab values.
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

#include "engine/model/context.h"
#include "tools/ggufd-run/commands.h"

namespace ggufd::run {

int cmd_logits(Args args) {
    std::string model_path, tokens_path, out_path;
    int threads = 0, threads_batch = 0;
    model::KvTypes kv_types;
    for (size_t i = 0; i < args.size(); ++i) {
        auto value = [&]() -> std::string {
            if (i + 1 >= args.size())
                throw std::runtime_error(std::string(args[i]) + " needs a value");
            return std::string(args[++i]);
        };
        if (args[i] == "--model")
            model_path = value();
        else if (args[i] == "--tokens-file")
            tokens_path = value();
        else if (args[i] == "--out")
            out_path = value();
        else if (args[i] == "--threads")
            threads = std::stoi(value());
        else if (args[i] == "--threads-batch")
            threads_batch = std::stoi(value());
        else if (args[i] == "--cache-type-k")
            kv_types.k = kernels::parse_kv_type(value());
        else if (args[i] == "--cache-type-v")
            kv_types.v = kernels::parse_kv_type(value());
        else
            throw std::runtime_error("unknown option " + std::string(args[i]));
    }
    if (model_path.empty() || tokens_path.empty() || out_path.empty()) {
        throw std::runtime_error("usage: logits --model M --tokens-file F --out OUT.f32");
    }
    std::ifstream in(tokens_path);
    if (!in) throw std::runtime_error("cannot read " + tokens_path);
    std::vector<model::BatchToken> batch;
    for (std::string line; std::getline(in, line);) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const auto pos = static_cast<int32_t>(batch.size());
        batch.push_back({0, std::stoi(line), pos, true});
    }
    if (batch.empty()) throw std::runtime_error(tokens_path + " holds no token ids");

    auto model = model::Model::load(model_path);
    model::ContextParams params;
    params.n_threads = threads;
    params.n_threads_batch = threads_batch;
    params.kv_type = kv_types;
    params.n_ctx = static_cast<int>(batch.size());
    model::Context ctx(model, params);
    std::vector<float> logits;
    ctx.eval(batch, logits);

    std::ofstream out(out_path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(logits.data()),
              static_cast<std::streamsize>(logits.size() * 4));
    if (!out) throw std::runtime_error("cannot write " + out_path);
    std::fprintf(stderr, "wrote %zu rows of %d logits to %s\n", batch.size(), ctx.n_vocab(),
                 out_path.c_str());
    return 0;
}

}  // namespace ggufd::run
