// POST /v1/embeddings and POST /v1/rerank (/rerank): the inputs are tokenized and checked here,
// on the I/O thread, then handed to the model's scheduler as one EmbeddingRequest whose inputs
// share its steps with generation; the pooled rows come back through a sink posted to the
// session's strand, where the answer is written in OpenAI's (embeddings) or Jina/Cohere's
// (rerank) shape.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include <fmt/format.h>

#include "server/api.h"
#include "server/job_sink.h"
#include "server/json_response.h"
#include "server/requests.h"
#include "server/responses.h"

namespace ggufd::server {

using nlohmann::json;
using scheduler::FinishReason;

namespace {

// Turns a finished request's rows into the response body (on the strand).
using Answer = std::function<json(const scheduler::EmbeddingResult&)>;

// One embedding or rerank request in flight, held by the session until it is answered.
class EmbeddingJob : public Exchange, public std::enable_shared_from_this<EmbeddingJob> {
  public:
    EmbeddingJob(std::shared_ptr<ResponseChannel> channel, Answer answer,
                 std::shared_ptr<ModelLease> lease, ErrorShape shape = ErrorShape::openai)
        : channel_(std::move(channel)),
          answer_(std::move(answer)),
          lease_(std::move(lease)),
          shape_(shape) {}
    ~EmbeddingJob() override { cancelled_->store(true); }

    void cancel() override { cancelled_->store(true); }

    scheduler::SubmitResult start(scheduler::Embedder& embedder,
                                  scheduler::EmbeddingRequest request);
    void finish(const scheduler::EmbeddingResult& result, FinishReason reason,
                const std::string& error);

  private:
    std::shared_ptr<ResponseChannel> channel_;
    Answer answer_;
    std::shared_ptr<ModelLease> lease_;  // the model stays loaded while the job lives
    ErrorShape shape_;
    std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
};

class EmbeddingJobSink : public JobSink<EmbeddingJob, scheduler::EmbeddingSink> {
  public:
    EmbeddingJobSink(Poster poster, std::weak_ptr<EmbeddingJob> job,
                     std::shared_ptr<std::atomic<bool>> cancelled)
        : JobSink(std::move(poster), std::move(job), std::move(cancelled),
                  [](EmbeddingJob& j) { j.finish({}, FinishReason::error, kDropped); }) {}

    void on_finish(scheduler::EmbeddingResult result, FinishReason reason,
                   const std::string& error) override {
        post_last([result = std::move(result), reason, error](EmbeddingJob& j) {
            j.finish(result, reason, error);
        });
    }
};

scheduler::SubmitResult EmbeddingJob::start(scheduler::Embedder& embedder,
                                            scheduler::EmbeddingRequest request) {
    int64_t tokens = 0;
    for (const auto& in : request.inputs) tokens += static_cast<int64_t>(in.size());
    request.sink =
        std::make_shared<EmbeddingJobSink>(channel_->poster(), weak_from_this(), cancelled_);
    scheduler::SubmitResult result = embedder.submit_embedding(std::move(request));
    if (!result.accepted()) return result;
    channel_->access().prompt_tokens = tokens;
    channel_->hold(shared_from_this());
    return result;
}

void EmbeddingJob::finish(const scheduler::EmbeddingResult& result, FinishReason reason,
                          const std::string& error) {
    ApiError failure = ApiError::internal("embedding failed: " + error);
    if (reason == FinishReason::stop) {
        channel_->respond(json_response(200, answer_(result)));
        return;
    }
    // Cancelled: the client left (nobody reads this) or the server is stopping.
    if (reason == FinishReason::cancelled) {
        failure = ApiError::unavailable("The model is shutting down", "shutting_down", 1);
    }
    channel_->respond(error_response(failure, shape_));
}

// Little-endian float32 bytes in base64, as OpenAI's encoding_format "base64".
std::string base64_floats(const std::vector<float>& values) {
    static constexpr char kDigits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bytes(values.size() * sizeof(float), '\0');
    std::memcpy(bytes.data(), values.data(), bytes.size());  // x86: little-endian already
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    for (size_t i = 0; i < bytes.size(); i += 3) {
        const size_t n = std::min<size_t>(3, bytes.size() - i);
        uint32_t group = 0;
        for (size_t k = 0; k < 3; ++k) {
            group = group << 8 | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
        }
        for (size_t k = 0; k < 4; ++k) {
            out += k <= n ? kDigits[(group >> (18 - 6 * k)) & 63] : '=';
        }
    }
    return out;
}

// One output vector: the first `dimensions` values, L2-normalised when asked.
std::vector<float> shape_vector(const float* row, int64_t width, const EmbeddingsRequest& r) {
    const int64_t n = r.dimensions ? std::min<int64_t>(*r.dimensions, width) : width;
    std::vector<float> v(row, row + n);
    if (r.normalize) {
        double sum = 0;
        for (float x : v) sum += double{x} * x;
        // A zero vector stays zero rather than becoming NaN.
        const double norm = std::sqrt(sum);
        if (norm > 0) {
            for (float& x : v) x = static_cast<float>(x / norm);
        }
    }
    return v;
}

json usage_json(int64_t prompt_tokens) {
    return {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}};
}

// The longest input this server takes for the model: the engine's limit, and the server's own
// prompt cap when it is lower.
int64_t max_input_tokens(ModelBackend& model, const ApiLimits& limits) {
    int64_t max = model.embedder().embedding_limits().max_tokens;
    if (limits.max_prompt_tokens > 0) max = std::min<int64_t>(max, limits.max_prompt_tokens);
    return max;
}

// An input beyond `max` tokens: refused with the numbers, or cut when the client asked for it
// (keeping a separator or end token the tokenizer put last, which the model's pooling may read).
void fit_input(std::vector<int32_t>& ids, int64_t max, bool truncate, int32_t trailing_special,
               const std::string& name) {
    if (static_cast<int64_t>(ids.size()) <= max) return;
    if (!truncate) {
        throw ApiError::bad_request(
            fmt::format("'{}' has {} tokens, more than this model's maximum of {} tokens per input "
                        "(send \"truncate\": true to cut it)",
                        name, ids.size(), max),
            "input", "context_length_exceeded");
    }
    const bool keep_last = trailing_special >= 0 && ids.back() == trailing_special && max > 1;
    const int32_t last = ids.back();
    ids.resize(static_cast<size_t>(max));
    if (keep_last) ids.back() = last;
}

void check_embedding_model(const ModelBackend& model, bool rerank) {
    const std::optional<model::Pooling> pooling = model.pooling();
    if (!pooling) {
        throw ApiError::bad_request(
            fmt::format("The model '{}' does not serve embeddings", model.name()), "model");
    }
    const bool ranks = *pooling == model::Pooling::rank;
    if (rerank && !ranks) {
        throw ApiError::bad_request(
            fmt::format("The model '{}' is not a reranker (its pooling is {}, not rank)",
                        model.name(), model::pooling_name(*pooling)),
            "model");
    }
    if (!rerank && ranks) {
        throw ApiError::bad_request(
            fmt::format("The model '{}' is a reranker: it scores documents at /v1/rerank",
                        model.name()),
            "model");
    }
    if (!rerank && *pooling == model::Pooling::none) {
        throw ApiError::bad_request(
            fmt::format("The model '{}' has pooling none (a vector per token); serve it with "
                        "--pooling mean, cls or last for /v1/embeddings",
                        model.name()),
            "model");
    }
}

}  // namespace

void Api::add_embedding_routes() {
    routes_.push_back({"POST", "/v1/embeddings",
                       &Api::model_route<parse_embeddings_request, &Api::embeddings>, false});
    for (const char* path : {"/v1/rerank", "/rerank"}) {
        routes_.push_back(
            {"POST", path, &Api::model_route<parse_rerank_request, &Api::rerank>, false});
    }
}

void Api::embeddings(const HttpRequest&, const std::shared_ptr<ResponseChannel>& channel,
                     ModelRequest<EmbeddingsRequest> parsed) {
    const bool base64 = parsed.r.base64;
    EmbeddingsAnswer answer = [base64, name = parsed.model.name()](
                                  const std::vector<std::vector<float>>& vectors, int64_t tokens) {
        json data = json::array();
        for (size_t i = 0; i < vectors.size(); ++i) {
            json item = {{"object", "embedding"}, {"index", i}};
            if (base64) {
                item["embedding"] = base64_floats(vectors[i]);
            } else {
                item["embedding"] = vectors[i];
            }
            data.push_back(std::move(item));
        }
        return json{{"object", "list"},
                    {"data", std::move(data)},
                    {"model", name},
                    {"usage", usage_json(tokens)}};
    };
    start_embeddings(std::move(parsed), channel, std::move(answer), ErrorShape::openai);
}

void Api::start_embeddings(ModelRequest<EmbeddingsRequest> parsed,
                           const std::shared_ptr<ResponseChannel>& channel, EmbeddingsAnswer answer,
                           ErrorShape shape) {
    auto [r, lease, model] = std::move(parsed);
    check_embedding_model(model, /*rerank=*/false);

    scheduler::EmbeddingRequest er;
    er.pooling = *model.pooling();
    const int64_t max = max_input_tokens(model, options_.limits);
    // The token a text's encoding ends with when the tokenizer appends one ([SEP], EOS).
    const std::vector<int32_t> bare = model.tokenize("", /*add_special=*/true, false);
    const int32_t trailing = bare.size() >= 2 ? bare.back() : -1;
    for (size_t i = 0; i < r.inputs.size(); ++i) {
        const PromptInput& in = r.inputs[i];
        std::vector<int32_t> ids =
            in.is_tokens ? in.tokens : model.tokenize(in.text, /*add_special=*/true, false);
        fit_input(ids, max, r.truncate, in.is_tokens ? -1 : trailing, fmt::format("input[{}]", i));
        er.inputs.push_back(std::move(ids));
    }
    const int64_t width = model.embedder().embedding_limits().dimensions;
    if (r.dimensions && *r.dimensions > width) {
        throw ApiError::bad_request(fmt::format("'dimensions' is {}, but this model's embeddings "
                                                "have {}",
                                                *r.dimensions, width),
                                    "dimensions");
    }

    Answer shaped = [r = std::move(r),
                     answer = std::move(answer)](const scheduler::EmbeddingResult& res) {
        std::vector<std::vector<float>> vectors;
        for (size_t i = 0; i * static_cast<size_t>(res.width) < res.rows.size(); ++i) {
            vectors.push_back(
                shape_vector(res.rows.data() + i * static_cast<size_t>(res.width), res.width, r));
        }
        return answer(vectors, res.prompt_tokens);
    };
    auto job = std::make_shared<EmbeddingJob>(channel, std::move(shaped), lease, shape);
    throw_refusal(job->start(model.embedder(), std::move(er)), "input", options_.retry_after_s);
}

void Api::rerank(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel,
                 ModelRequest<RerankRequest> parsed) {
    auto [r, lease, model] = std::move(parsed);
    check_embedding_model(model, /*rerank=*/true);

    scheduler::EmbeddingRequest er;
    er.pooling = model::Pooling::rank;
    const int64_t max = max_input_tokens(model, options_.limits);
    for (size_t i = 0; i < r.documents.size(); ++i) {
        std::vector<int32_t> ids = model.rerank_pair(r.query, r.documents[i]);
        if (static_cast<int64_t>(ids.size()) > max) {
            throw ApiError::bad_request(
                fmt::format("the query with 'documents[{}]' has {} tokens, more than this model's "
                            "maximum of {} tokens per pair",
                            i, ids.size(), max),
                "documents", "context_length_exceeded");
        }
        er.inputs.push_back(std::move(ids));
    }

    Answer answer = [r = std::move(r), name = model.name(),
                     id = request.request_id](const scheduler::EmbeddingResult& res) {
        // The model's raw score (the classifier's first output), best first.
        std::vector<size_t> order(r.documents.size());
        std::iota(order.begin(), order.end(), 0);
        const auto score = [&](size_t i) { return res.rows[i * static_cast<size_t>(res.width)]; };
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return score(a) > score(b); });
        if (r.top_n && *r.top_n < order.size()) order.resize(*r.top_n);
        json results = json::array();
        for (size_t i : order) {
            json item = {{"index", i}, {"relevance_score", score(i)}};
            if (r.return_documents) item["document"] = {{"text", r.documents[i]}};
            results.push_back(std::move(item));
        }
        return json{{"id", "rerank-" + id},
                    {"object", "list"},
                    {"model", name},
                    {"results", std::move(results)},
                    {"usage", usage_json(res.prompt_tokens)}};
    };
    auto job = std::make_shared<EmbeddingJob>(channel, std::move(answer), lease);
    throw_refusal(job->start(model.embedder(), std::move(er)), "documents", options_.retry_after_s);
}

}  // namespace ggufd::server
