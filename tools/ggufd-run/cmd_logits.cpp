// ggufd-run logits --model M --tokens-file F --out OUT.f32
// Evaluates the ids in F (one a line) as one batch at positions 0.. and writes every position's
// logits as little-endian float32 rows of n_vocab values.
//
// ggufd-run logits --model M --mmproj P --prompt-file F --image IMG [--image IMG ...] --out OUT
//     [--embd-out DIR]
// A prompt with pictures: its <__media__> markers take the images in order (engine/vision's
// layout), every position's logits go to OUT as above, and each image's embeddings to
// DIR/<image stem>.embd.f32 (rows of the text model's input width, chunks in prompt order).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "engine/model/context.h"
#include "engine/vision/prompt.h"
#include "tools/ggufd-run/commands.h"

namespace ggufd::run {

namespace {

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_f32(const std::filesystem::path& path, const std::vector<float>& v) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

int logits_with_images(const std::string& model_path, const std::string& mmproj,
                       const std::string& prompt_path, const std::vector<std::string>& image_paths,
                       const std::string& out_path, const std::string& embd_dir,
                       const model::ContextParams& base) {
    auto model = model::Model::load(model_path);
    const auto projector = vision::Projector::load(mmproj);
    projector->check_fits(model->hparams().n_embd_inp());
    const auto tok = tokenizer::Tokenizer::from_file(model_path);
    model::ContextParams params = base;
    model::Context ctx(model, params);
    std::vector<vision::EncodedImage> images;
    for (const std::string& p : image_paths) {
        const std::string bytes = read_all(p);
        images.push_back(vision::encode_image(
            *projector,
            vision::decode_image({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}),
            ctx.pool()));
    }
    const auto chunks =
        vision::layout_prompt(projector->desc(), tok, read_all(prompt_path), images);
    const int64_t n = vision::prompt_tokens(chunks, images);
    if (n > ctx.cache().n_ctx()) {
        throw std::runtime_error("the prompt's " + std::to_string(n) +
                                 " tokens do not fit the context");
    }
    write_f32(out_path, vision::eval_prompt(ctx, 0, projector->desc(), chunks, images, true));
    if (!embd_dir.empty()) {
        for (size_t k = 0; k < images.size(); ++k) {
            std::vector<float> rows;
            for (const auto& c : images[k].chunks)
                rows.insert(rows.end(), c.embd.begin(), c.embd.end());
            write_f32(std::filesystem::path(embd_dir) /
                          (std::filesystem::path(image_paths[k]).stem().string() + ".embd.f32"),
                      rows);
        }
    }
    std::fprintf(stderr, "wrote %lld rows of %d logits to %s\n", static_cast<long long>(n),
                 ctx.n_vocab(), out_path.c_str());
    return 0;
}

}  // namespace

int cmd_logits(Args args) {
    std::string model_path, tokens_path, out_path, mmproj, prompt_path, embd_dir;
    std::vector<std::string> images;
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
        else if (args[i] == "--mmproj")
            mmproj = value();
        else if (args[i] == "--prompt-file")
            prompt_path = value();
        else if (args[i] == "--image")
            images.push_back(value());
        else if (args[i] == "--embd-out")
            embd_dir = value();
        else
            throw std::runtime_error("unknown option " + std::string(args[i]));
    }
    if (!mmproj.empty()) {
        if (model_path.empty() || prompt_path.empty() || out_path.empty()) {
            throw std::runtime_error(
                "usage: logits --model M --mmproj P --prompt-file F --image IMG... --out OUT.f32 "
                "[--embd-out DIR]");
        }
        model::ContextParams params;
        params.n_threads = threads;
        params.n_threads_batch = threads_batch;
        params.kv_type = kv_types;
        return logits_with_images(model_path, mmproj, prompt_path, images, out_path, embd_dir,
                                  params);
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
