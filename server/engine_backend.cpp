#include "server/engine_backend.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "engine/model/context.h"
#include "engine/model/describe.h"
#include "engine/model/random_model.h"
#include "engine/vision/image.h"
#include "engine/vision/media.h"
#include "gguf/inspect.h"
#include "gguf/naming.h"
#include "server/whisper_backend.h"

namespace ggufd::server {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// Metadata values as JSON; arrays longer than `max_items` become a summary, so huge vocabularies
// never end up in a response.
Json value_json(const gguf::Value& v, size_t max_items) {
    return std::visit(
        [&](const auto& x) -> Json {
            using S = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<S, gguf::Array>) {
                if (x.size() > max_items) {
                    return Json{{"type", "array"},
                                {"element_type", gguf::value_type_name(x.element_type())},
                                {"count", x.size()}};
                }
                Json items = Json::array();
                for (size_t i = 0; i < x.size(); ++i)
                    items.push_back(value_json(x.at(i), max_items));
                return items;
            } else if constexpr (std::is_same_v<S, float>) {
                return Json(gguf::Value::widen_float(x));
            } else if constexpr (std::is_same_v<S, std::string>) {
                return Json(x);
            } else {
                return Json(x);
            }
        },
        v.storage());
}

// Bytes this process may still take: MemAvailable, or less under a cgroup (v2) memory limit, as in
// a container. 0 when neither can be read (the check is then skipped).
uint64_t available_memory() {
    uint64_t available = 0;
    std::ifstream meminfo("/proc/meminfo");
    std::string line;
    while (std::getline(meminfo, line)) {
        std::istringstream in(line);
        std::string key;
        uint64_t kib = 0;
        if (in >> key >> kib && key == "MemAvailable:") {
            available = kib * 1024;
            break;
        }
    }
    std::ifstream max_file("/sys/fs/cgroup/memory.max"),
        current_file("/sys/fs/cgroup/memory.current");
    uint64_t limit = 0, used = 0;
    if (max_file >> limit && current_file >> used) {  // "max" (no limit) fails to parse
        const uint64_t left = limit > used ? limit - used : 0;
        if (available == 0 || left < available) available = left;
    }
    return available;
}

// The bytes of the KV cache and recurrent state a scheduler with these settings allocates for
// the model.
uint64_t cache_bytes(const model::HParams& hp, const scheduler::SchedulerParams& params) {
    return model::SequenceCache::bytes_needed(
        hp, {.n_seq = params.n_slots,
             .n_ctx = model::default_context_size(hp, params.n_ctx, params.kv_pool_cells),
             .kv_types = params.kv_types,
             .swa_batch = std::max(params.batch_size, 1),
             .pool_cells = params.kv_pool_cells});
}

// The KV pool every slot draws from, from a memory budget (0: half of what is available now):
// the context a request may use is the model's trained one when the pool holds it, else what
// the pool holds (--ctx-size, when given with a budget, is kept and the pool holds at least it);
// the pool is at most every slot's whole context at once. Logged, since it decides what requests
// fit.
scheduler::SchedulerParams resolve_kv_pool(const model::HParams& hp,
                                           scheduler::SchedulerParams params, uint64_t budget_bytes,
                                           const std::string& name) {
    const size_t cell = model::KvCache::pool_cell_bytes(hp, params.kv_types);
    if (params.kv_pool_cells > 0 || !hp.has_attention() || cell == 0) return params;
    // --ctx-size without --kv-memory sizes every slot for its whole context, as before the pool
    // (and the memory check refuses what does not fit).
    if (params.n_ctx > 0 && budget_bytes == 0) return params;
    if (budget_bytes == 0) budget_bytes = available_memory() / 2;
    if (budget_bytes == 0) return params;  // memory unknown: every slot its default context
    const auto cells = static_cast<int64_t>(std::min<uint64_t>(budget_bytes / cell, 1u << 30));
    const int train = model::default_context_size(hp, 0, int64_t{1} << 30);
    const int n_ctx =
        params.n_ctx > 0 ? params.n_ctx : static_cast<int>(std::clamp<int64_t>(cells, 1, train));
    params.n_ctx = n_ctx;
    params.kv_pool_cells =
        std::clamp<int64_t>(cells, n_ctx, int64_t{std::max(params.n_slots, 1)} * n_ctx);
    spdlog::info("{}: KV pool of {} tokens ({}) shared by {} slots; a request may use {} tokens{}",
                 name, params.kv_pool_cells,
                 gguf::human_bytes(static_cast<uint64_t>(params.kv_pool_cells) * cell),
                 params.n_slots, n_ctx,
                 n_ctx < train ? fmt::format(" (trained for {}; --kv-memory sizes the pool)", train)
                               : std::string());
    return params;
}

// The general.* keys, and with `full` every key as "metadata" (long arrays summarised).
void describe_metadata(const gguf::File& f, bool full, Json& d) {
    Json general = Json::object();
    Json metadata = Json::object();
    for (const gguf::KeyValue& kv : f.metadata().entries()) {
        if (kv.key.starts_with("general.")) general[kv.key.substr(8)] = value_json(kv.value, 64);
        if (full) metadata[kv.key] = value_json(kv.value, 64);
    }
    d["general"] = std::move(general);
    if (full) d["metadata"] = std::move(metadata);
}

// Bytes of the model's files (every file of a split set), all mapped.
uint64_t mapped_bytes(const gguf::File& f) {
    uint64_t sum = 0;
    for (const auto& shard : f.shards()) sum += shard.size;
    return sum;
}

// The KV cache and the recurrent state store are allocated and zeroed up front; caches larger
// than the memory left would get the process killed by the kernel rather than throw, so they are
// refused before allocating.
void check_cache_memory(const model::Model& model, const scheduler::SchedulerParams& params) {
    const int n_ctx =
        model::default_context_size(model.hparams(), params.n_ctx, params.kv_pool_cells);
    const uint64_t needed = cache_bytes(model.hparams(), params);
    const uint64_t available = available_memory();
    if (available == 0 || needed <= available) return;
    if (!model.hparams().has_attention()) {
        throw std::runtime_error(fmt::format(
            "the recurrent state needs {} ({} slots (--parallel)) but only {} of memory is "
            "available; lower --parallel",
            gguf::human_bytes(needed), params.n_slots, gguf::human_bytes(available)));
    }
    throw std::runtime_error(fmt::format(
        "the KV cache needs {} ({} slots (--parallel) x {} tokens (--ctx-size)) but only {} of "
        "memory is available; lower --ctx-size or --parallel, or store it as q8_0 or q4_0 "
        "(--cache-type-k, --cache-type-v; now {} and {})",
        gguf::human_bytes(needed), params.n_slots, n_ctx, gguf::human_bytes(available),
        kernels::kv_type_name(params.kv_types.k), kernels::kv_type_name(params.kv_types.v)));
}

}  // namespace

std::shared_ptr<EngineBackend> EngineBackend::load(const std::string& path,
                                                   const EngineBackendOptions& options) {
    const auto t0 = std::chrono::steady_clock::now();
    // Ready to serve at once; the weights the fast kernels read better repacked are rearranged
    // by a model thread meanwhile.
    auto model = model::Model::load(path, {.repack = model::Repack::background});
    EngineBackendOptions resolved = options;
    resolved.scheduler =
        resolve_kv_pool(model->hparams(), options.scheduler, options.kv_memory_bytes, options.name);
    check_cache_memory(*model, resolved.scheduler);
    if (!options.draft_model.empty()) {
        try {
            resolved.scheduler.draft_model =
                model::Model::load(options.draft_model, {.repack = model::Repack::background});
        } catch (const std::exception& e) {
            throw std::runtime_error("draft model " + options.draft_model + ": " + e.what());
        }
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return from_model(std::move(model), resolved, secs);
}

std::shared_ptr<EngineBackend> EngineBackend::from_model(std::shared_ptr<const model::Model> model,
                                                         const EngineBackendOptions& options,
                                                         double load_seconds) {
    std::shared_ptr<EngineBackend> b(new EngineBackend());
    b->name_ = options.name;
    b->model_ = std::move(model);
    b->load_seconds_ = load_seconds;
    b->draft_model_ = options.scheduler.draft_model;
    b->tokenizer_ = std::make_shared<const tokenizer::Tokenizer>(
        tokenizer::Vocab::from_gguf(b->model_->file()));
    const auto shipped = b->model_->file().get_optional<std::string>("tokenizer.chat_template");
    b->model_has_template_ = shipped.has_value();
    const std::string_view source = jinja::select_template(options.chat_template, shipped);
    b->template_ = jinja::Template::compile(source);
    b->template_source_ = source;
    b->chat_traits_ = chat::read_template(source, options.tool_parser);
    const tokenizer::Tokenizer& t = *b->tokenizer_;
    for (std::string_view markup : chat::markup_texts(b->chat_traits_.family)) {
        for (int32_t id : b->tokenize(std::string(markup), /*add_special=*/false,
                                      /*parse_special=*/true)) {
            const uint32_t attrs = t.vocab().token(id).attrs;
            if ((attrs & tokenizer::attr::kControl) && !t.is_eog(id))
                b->chat_markup_tokens_.push_back(id);
        }
    }
    std::sort(b->chat_markup_tokens_.begin(), b->chat_markup_tokens_.end());
    b->chat_markup_tokens_.erase(
        std::unique(b->chat_markup_tokens_.begin(), b->chat_markup_tokens_.end()),
        b->chat_markup_tokens_.end());
    if (t.bos() >= 0) b->bos_text_ = t.token_to_piece(t.bos(), true);
    if (t.eos() >= 0) b->eos_text_ = t.token_to_piece(t.eos(), true);
    scheduler::SchedulerParams params = options.scheduler;
    for (const LoraFile& l : options.loras) {
        params.adapters.push_back({l.name, model::LoraAdapter::load(l.path, b->model_), l.scale});
    }
    if (!options.mmproj.empty()) {
        // Refused (naming the key) unless its rows are the text model's input rows.
        b->projector_ = vision::Projector::load(options.mmproj);
        b->projector_->check_fits(b->model_->hparams().n_embd_inp());
    }
    b->scheduler_ = std::make_unique<scheduler::Scheduler>(b->model_, b->tokenizer_, params);
    b->pooling_ = options.pooling.value_or(b->model_->hparams().pooling);
    b->kv_bytes_ = cache_bytes(b->model_->hparams(), options.scheduler);
    if (b->draft_model_) {
        // The draft's cache: f16 cells, as many slots and tokens as the target's.
        scheduler::SchedulerParams draft_cells = options.scheduler;
        draft_cells.n_ctx = b->scheduler_->context_size();
        draft_cells.kv_types = {};
        b->draft_kv_bytes_ = cache_bytes(b->draft_model_->hparams(), draft_cells);
    }
    if (b->pooling_ == model::Pooling::rank && !b->model_->weights().cls_out) {
        throw std::runtime_error(
            "rank pooling needs a classifier head (cls.output), which this model lacks");
    }
    return b;
}

std::vector<int32_t> EngineBackend::rerank_pair(const std::string& query,
                                                const std::string& document) const {
    const tokenizer::SpecialTokens& sp = tokenizer_->vocab().special();
    std::vector<int32_t> ids;
    auto special = [&](int32_t id) {
        if (id != tokenizer::kNoToken) ids.push_back(id);
    };
    auto text = [&](const std::string& t) {
        const std::vector<int32_t> part = tokenize(t, /*add_special=*/false, false);
        ids.insert(ids.end(), part.begin(), part.end());
    };
    special(sp.bos);
    text(query);
    special(sp.eos);
    special(sp.sep);
    text(document);
    special(sp.eos);
    return ids;
}

std::vector<int32_t> EngineBackend::tokenize(const std::string& text, bool add_special,
                                             bool parse_special) const {
    tokenizer::EncodeOptions o;
    o.parse_special = parse_special;
    if (!add_special) {
        o.add_bos = false;
        o.add_eos = false;
    }
    return tokenizer_->encode(text, o);
}

std::string EngineBackend::detokenize(const std::vector<int32_t>& tokens) const {
    return tokenizer_->decode(tokens);
}

std::vector<int32_t> EngineBackend::tokenize_chat_prompt(const jinja::Rendered& prompt) const {
    tokenizer::EncodeOptions o;
    o.add_bos = false;
    o.add_eos = false;
    o.parse_special = true;
    o.plain_ranges = prompt.content_ranges;
    return tokenizer_->encode(prompt.text, o);
}

ChatTokens EngineBackend::tokenize_chat_prompt(const jinja::Rendered& prompt,
                                               const std::vector<std::string>& images) const {
    if (!projector_) throw ImageRefused("the model '" + name_ + "' does not take images");
    std::vector<vision::Image> pictures;
    pictures.reserve(images.size());
    for (size_t i = 0; i < images.size(); ++i) {
        const std::string& bytes = images[i];
        try {
            pictures.push_back(vision::decode_image(std::span<const uint8_t>(
                reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())));
        } catch (const vision::ImageError& e) {
            throw ImageRefused(fmt::format("image {} of the request: {}", i + 1, e.what()));
        }
    }
    const bool mrope = model_->hparams().desc->rope_sections != model::RopeSections::none;
    try {
        vision::MediaPrompt p =
            vision::media_prompt(projector_, mrope, *tokenizer_, prompt.text, pictures,
                                 {.add_bos = false, .plain_ranges = prompt.content_ranges});
        return {std::move(p.tokens), std::move(p.media)};
    } catch (const vision::ImageError& e) {
        throw ImageRefused(e.what());
    } catch (const std::invalid_argument& e) {
        throw ImageRefused(e.what());
    }
}

jinja::Rendered EngineBackend::render_chat(const OrderedJson& messages, const OrderedJson& tools,
                                           bool add_generation_prompt,
                                           const OrderedJson& extra_context) const {
    jinja::ChatContext c;
    c.messages = messages;
    if (!tools.is_null()) c.tools = tools;
    c.add_generation_prompt = add_generation_prompt;
    c.bos_token = bos_text_;
    c.eos_token = eos_text_;
    if (extra_context.is_object()) c.extra = extra_context;
    try {
        return template_->render(jinja::build_chat_context(c), jinja::chat_render_options(c));
    } catch (const jinja::TemplateError& e) {
        // A template that raises judges the conversation (e.g. roles must alternate): the
        // client's to fix.
        throw ChatTemplateError(e.what());
    }
}

Json EngineBackend::describe(bool full) const {
    const gguf::File& f = model_->file();
    const model::HParams& hp = model_->hparams();
    const gguf::Totals totals = gguf::totals(f);
    Json d;
    d["id"] = name_;
    d["architecture"] = hp.arch;
    d["parameters"] = totals.parameters;
    d["file_type"] = gguf::name_parts_from_metadata(f).encoding;
    d["bits_per_weight"] = totals.bits_per_weight();
    d["context_length"] = scheduler_->context_size();
    d["context_length_trained"] = hp.n_ctx_train;
    d["hyperparameters"] = model::describe_hparams(hp);
    d["size_bytes"] = f.file_size();
    d["chat_template"] = model_has_template_;
    d["tool_parser"] = chat::family_name(chat_traits_.family);
    // Whether its template reasons: a forced call or JSON reply may then start with reasoning.
    d["reasoning"] = chat_traits_.reasons;
    d["vocab_size"] = tokenizer_->n_vocab();
    d["slots"] = scheduler_->n_slots();
    d["load_seconds"] = load_seconds_;
    // What the model serves: generation (not an encoder), embeddings, reranking.
    d["generation"] = model_->weights().output != nullptr;
    d["pooling"] = std::string(model::pooling_name(pooling_));
    d["embeddings"] = pooling_ != model::Pooling::rank && pooling_ != model::Pooling::none;
    d["rerank"] = pooling_ == model::Pooling::rank;
    d["embedding_length"] = hp.n_embd;
    // Speculative decoding: the draft source requests get unless they choose; a model whose
    // state cannot be cut back (recurrent, hybrid) never drafts.
    const scheduler::SpeculativeParams sp = scheduler_->speculative();
    const bool drafts = !hp.is_recurrent() && sp.type != scheduler::DraftType::none;
    d["speculative"] = {{"type", drafts ? scheduler::draft_type_name(sp.type) : "none"},
                        {"n_max", sp.n_max},
                        {"n_min", sp.n_min},
                        {"p_min", sp.p_min},
                        {"ngram", sp.ngram}};
    if (draft_model_) {
        d["speculative"]["draft_model"] = {{"path", draft_model_->file().name()},
                                           {"architecture", draft_model_->hparams().arch}};
    }
    // The adapters requests may choose (lora[].id is the index or the name).
    Json adapters = Json::array();
    const auto list = scheduler_->adapters();
    const std::vector<scheduler::NamedAdapter>& named = *list;
    for (size_t i = 0; i < named.size(); ++i) {
        const model::LoraAdapter& a = *named[i].adapter;
        int64_t rank = 0;
        for (const auto& [w, lw] : a.weights()) rank = std::max(rank, lw.rank);
        adapters.push_back({{"id", i},
                            {"name", named[i].name},
                            {"path", a.file().name()},
                            {"scale", named[i].default_scale},
                            {"alpha", a.alpha()},
                            {"rank", rank},
                            {"matrices", a.weights().size()}});
    }
    d["lora_adapters"] = std::move(adapters);
    d["vision"] = projector_ != nullptr;
    if (projector_) {
        d["mmproj"] = {{"path", projector_->file().name()},
                       {"projector_type", std::string(projector_->desc().name)}};
    }
    describe_metadata(f, full, d);
    return d;
}

uint64_t EngineBackend::memory_bytes() const {
    // The mapped files, less the matrices whose pages were released for their repacked copies,
    // plus those copies and the KV cache; and the same of the draft model.
    auto weights = [](const model::Model& m) {
        const gguf::File& f = m.file();
        uint64_t bytes = mapped_bytes(f) + m.repacked_bytes();
        for (const gguf::TensorInfo& t : f.tensors()) {
            if (m.repacked(&t)) bytes -= std::min<uint64_t>(bytes, t.n_bytes);
        }
        return bytes;
    };
    uint64_t bytes = weights(*model_) + kv_bytes_;
    if (draft_model_) bytes += weights(*draft_model_) + draft_kv_bytes_;
    return bytes;
}

Json describe_file(const gguf::File& f) {
    const gguf::Totals totals = gguf::totals(f);
    Json d;
    d["architecture"] = f.architecture();
    d["parameters"] = totals.parameters;
    d["file_type"] = gguf::name_parts_from_metadata(f).encoding;
    d["bits_per_weight"] = totals.bits_per_weight();
    d["size_bytes"] = mapped_bytes(f);
    d["context_length_trained"] = nullptr;
    try {
        const model::HParams hp = model::read_hparams(f);
        d["context_length_trained"] = hp.n_ctx_train;
        d["hyperparameters"] = model::describe_hparams(hp);
    } catch (const gguf::Error&) {
        // An unsupported file is described as far as its header goes; inspect() says why.
    }
    d["chat_template"] = f.metadata().contains("tokenizer.chat_template");
    describe_metadata(f, /*full=*/true, d);
    return d;
}

ModelLoader::Header EngineLoader::inspect(const std::string& name,
                                          const std::filesystem::path& path) {
    // Mapping reads nothing: only the header's pages are touched, never a tensor's.
    const gguf::File f = gguf::File::open_set(path);
    Header h;
    h.description = describe_file(f);
    h.description["id"] = name;
    if (whisper::is_whisper(f)) {  // speech to text: whisper_backend.h
        h.description["generation"] = false;
        h.description["transcription"] = true;
        h.bytes = mapped_bytes(f);
        return h;
    }
    const nlohmann::ordered_json support = model::describe_support(f);
    if (support.contains("supported") && !support["supported"].get<bool>()) {
        throw std::runtime_error(support.value("reason", std::string("not supported")));
    }
    const model::HParams hp = model::read_hparams(f);
    const EngineBackendOptions options = options_for_(name);
    h.bytes = mapped_bytes(f) + cache_bytes(hp, options.scheduler);
    h.description["vision"] = !options.mmproj.empty() || mmproj_for(path).has_value();
    return h;
}

std::shared_ptr<ModelBackend> EngineLoader::load(const std::string& name,
                                                 const std::filesystem::path& path) {
    EngineBackendOptions options = options_for_(name);
    if (is_whisper_file(path)) {
        return WhisperBackend::load(path, {.name = name, .n_threads = options.scheduler.n_threads});
    }
    if (options.mmproj.empty()) {
        if (auto paired = mmproj_for(path)) options.mmproj = paired->string();
    }
    return EngineBackend::load(path.string(), options);
}

namespace {

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// The part of an mmproj file's name that names its model: less "mmproj-", ".gguf" and a
// trailing encoding ("-f16", "-q8_0", ...).
std::string mmproj_stem(const std::filesystem::path& path) {
    std::string stem = lower(path.stem().string()).substr(7);
    const size_t dash = stem.rfind('-');
    if (dash != std::string::npos) {
        const std::string tail = stem.substr(dash + 1);
        for (const char* enc : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"}) {
            if (tail == enc) {
                stem.resize(dash);
                break;
            }
        }
    }
    return stem;
}

}  // namespace

bool is_mmproj_name(const std::filesystem::path& path) {
    return path.filename().string().starts_with("mmproj-") && path.extension() == ".gguf";
}

std::optional<std::filesystem::path> mmproj_for(const std::filesystem::path& model_path) {
    std::error_code ec;
    const std::filesystem::path dir =
        model_path.parent_path().empty() ? std::filesystem::path(".") : model_path.parent_path();
    const std::string model_name = lower(model_path.filename().string());
    std::vector<std::filesystem::path> projectors;
    size_t models = 0;
    for (const auto& item : std::filesystem::directory_iterator(dir, ec)) {
        if (!item.is_regular_file(ec) || item.path().extension() != ".gguf") continue;
        if (is_mmproj_name(item.path())) {
            projectors.push_back(item.path());
        } else {
            ++models;
        }
    }
    std::optional<std::filesystem::path> best;
    size_t best_len = 0;
    for (const auto& p : projectors) {
        const std::string stem = mmproj_stem(p);
        if (!stem.empty() && model_name.starts_with(stem) && stem.size() > best_len) {
            best = p;
            best_len = stem.size();
        }
    }
    if (!best && projectors.size() == 1 && models == 1) best = projectors.front();
    return best;
}

std::shared_ptr<EngineBackend> make_demo_backend(const scheduler::SchedulerParams& params,
                                                 std::optional<std::string> chat_template) {
    model::RandomModelSpec spec;
    spec.name = kDemoModelName;
    spec.n_embd = 256;
    spec.n_layer = 4;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 768;
    spec.n_ctx = 2048;
    spec.type = gguf::TensorType::Q8_0;
    gguf::Writer w = model::make_random_model(spec);
    // /models shows this, and so does the chat page: a newcomer must not mistake it for a model.
    w.set("general.description",
          "ggufd's built-in demo: random weights, so it writes gibberish (serve a real model with "
          "--model NAME=path/to/model.gguf); byte-level vocabulary");
    auto model = model::Model::from_file(gguf::File::from_bytes(w.to_bytes(), "<built-in demo>"));
    EngineBackendOptions options;
    options.name = kDemoModelName;
    options.scheduler = params;
    options.chat_template = std::move(chat_template);
    return EngineBackend::from_model(std::move(model), options);
}

}  // namespace ggufd::server
