// Embedding and reranking requests: inputs evaluated whole and pooled into one vector (or score)
// each. They go through the same scheduler as generation: each input takes a free slot for one
// step, sharing that step's batch with the generating slots, and gives its slot back at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/arch.h"
#include "engine/scheduler/generation.h"

namespace ggufd::scheduler {

struct EmbeddingResult {
    std::vector<float> rows;  // `width` floats per input (per token for Pooling::none), in order
    int64_t width = 0;
    int32_t prompt_tokens = 0;  // tokens of all the inputs
};

class EmbeddingSink {
  public:
    virtual ~EmbeddingSink() = default;
    // The one call a request gets, on the scheduler thread (hand it over; never block): the
    // result when reason is stop, else cancelled (or the scheduler stopped) or error with a
    // message.
    virtual void on_finish(EmbeddingResult result, FinishReason reason,
                           const std::string& error) = 0;
    // Polled each step: true drops the request.
    virtual bool cancelled() const = 0;
};

struct EmbeddingRequest {
    std::vector<std::vector<int32_t>> inputs;  // each one sequence, evaluated whole
    model::Pooling pooling = model::Pooling::mean;
    std::shared_ptr<EmbeddingSink> sink;
};

// What an embedding request needs of the model: inputs of at most max_tokens tokens of a
// vocabulary of n_vocab, and a classifier head for rank pooling; and what it gives back.
struct EmbeddingLimits {
    int32_t n_vocab = 0;
    int32_t max_tokens = 0;
    bool can_rank = false;
    int64_t dimensions = 0;  // floats in a pooled embedding (n_embd)
};

// The engine's checks of an embedding request: at least one input, none empty or longer than
// max_tokens (prompt_too_long, with the numbers), ids in the vocabulary ("input"), rank pooling
// only with a classifier head.
SubmitResult validate(const EmbeddingRequest& request, const EmbeddingLimits& limits);

// What the server needs of a model's scheduler for embeddings and reranking.
class Embedder {
  public:
    virtual ~Embedder() = default;
    // Takes the request or says why not (validate()'s verdict, or a full queue).
    virtual SubmitResult submit_embedding(EmbeddingRequest request) = 0;
    virtual EmbeddingLimits embedding_limits() const = 0;
};

}  // namespace ggufd::scheduler
