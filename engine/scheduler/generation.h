// The contract between the HTTP layer and a model's scheduler: a request to generate, and the
// events that flow back. The server implements GenerationSink; the scheduler calls it from its
// own thread, so implementations must hand the events over (e.g. post to the session's strand)
// and never block.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/model/lora.h"
#include "engine/sampling/params.h"
#include "engine/scheduler/draft.h"
#include "engine/scheduler/media.h"

namespace ggufd::scheduler {

enum class FinishReason { stop, length, cancelled, error };

struct TokenLogprob {
    int32_t token = 0;
    std::string text;  // the token's bytes (may be part of a UTF-8 character)
    float logprob = 0.0f;
};

// One step of output for one request: text is complete UTF-8 (a character split across tokens
// is held back until whole); it may be empty when a token only started a character or is being
// held back because it could start a stop string.
struct TokenEvent {
    std::string text;
    int32_t token = 0;
    std::vector<TokenLogprob> logprobs;  // chosen token first, then the top alternatives
};

struct Usage {
    int32_t prompt_tokens = 0;
    int32_t completion_tokens = 0;
    int32_t cached_prompt_tokens = 0;  // reused from a slot's KV prefix
    double time_to_first_token_s = 0.0;
    // Where the request's time went once it had a slot (llama-server's `timings`): evaluating the
    // prompt (slot taken to first token sampled) and generating (first token to the end).
    double prompt_s = 0.0;
    double generation_s = 0.0;
    // The request's stop string that ended the reply (its text is not in the output); empty when
    // something else ended it. Anthropic's and Ollama's answers name it.
    std::string stop_string;
    // Speculative decoding: draft tokens verified, and how many of them the output kept
    // (llama-server's timings.draft_n and draft_n_accepted).
    int32_t draft_tokens = 0;
    int32_t draft_accepted = 0;
};

class GenerationSink {
  public:
    virtual ~GenerationSink() = default;
    // Called once the request has a slot and its prompt is being processed.
    virtual void on_started() {}
    virtual void on_token(const TokenEvent& event) = 0;
    // Last call for the request. `error` holds the message when reason == error.
    virtual void on_finish(FinishReason reason, const Usage& usage, const std::string& error) = 0;
    // Polled by the scheduler each step: a true answer frees the request's slot.
    virtual bool cancelled() const = 0;
};

// A LoRA adapter a model's requests may use: its name (from --lora), the adapter, and the scale
// it is applied with to a request that does not say (0: only when asked for).
struct NamedAdapter {
    std::string name;
    std::shared_ptr<const model::LoraAdapter> adapter;
    float default_scale = 0.0f;
};

// One adapter a request asks for: by its position in the model's list (`id` >= 0, as
// llama-server numbers them) or by `name`, and the scale to apply it with.
struct AdapterChoice {
    int64_t id = -1;
    std::string name;
    float scale = 1.0f;
};

// A request's choices about drafting, each overriding the model's default when present
// (SchedulerParams::speculative); merged and checked by validate().
struct SpeculativeChoice {
    std::optional<DraftType> type;
    std::optional<int32_t> n_max, n_min, ngram;
    std::optional<float> p_min;
    SpeculativeParams over(SpeculativeParams defaults) const;
};

struct GenerationRequest {
    std::vector<int32_t> prompt;
    sampling::SamplingParams sampling;
    sampling::StopParams stop;
    std::shared_ptr<GenerationSink> sink;
    // Control tokens whose text the reply keeps (ids in any order; others decode to nothing): the
    // markup a chat family writes with special tokens ([TOOL_CALLS], <|python_tag|>, harmony's
    // <|channel|>). Under a grammar every control token keeps its text, as the grammar matched it.
    std::vector<int32_t> render_tokens;
    // The LoRA adapters to generate with, exactly these (an adapter not listed is not applied);
    // nullopt: each adapter at its default scale.
    std::optional<std::vector<AdapterChoice>> lora;
    SpeculativeChoice speculative;
    // The prompt's pictures (media.h): their spans hold placeholder ids. Shared by a request's
    // choices, so each picture is encoded once.
    std::shared_ptr<PromptMedia> media;
};

enum class SubmitStatus {
    accepted,
    queue_full,       // answer 503 with Retry-After
    prompt_too_long,  // answer 400: the prompt does not fit the context
    invalid,          // answer 400: a parameter the engine refuses
};

// Whether a request is taken, and if not why: the request parameter at fault (by its name in a
// request: "prompt", "temperature", "logit_bias", ...) and a message ready for the client.
struct SubmitResult {
    SubmitStatus status = SubmitStatus::accepted;
    std::string param;
    std::string message;
    bool accepted() const { return status == SubmitStatus::accepted; }
};

// Every id in 0..n_vocab-1, otherwise throws sampling::InvalidParam naming `param` and the
// offending position.
void check_token_ids(std::span<const int32_t> tokens, int32_t n_vocab, const std::string& param);

// The engine's checks of a request against a model with n_vocab tokens and n_ctx positions per
// sequence, each done here once: a non-empty prompt that leaves room for one generated token, its
// token ids, the sampling parameters (ranges, logit_bias ids) and the stop parameters. Cheap
// (linear in the prompt and logit_bias): callers may run it before anything is sent.
// and the LoRA adapters the request chooses among the model's `adapters`.
// The request's speculative choices are checked over `speculative`, the model's defaults.
SubmitResult validate(const GenerationRequest& request, int32_t n_vocab, int32_t n_ctx,
                      std::span<const NamedAdapter> adapters = {},
                      const SpeculativeParams& speculative = {});

// The adapter uses of a request (its `lora`, or the defaults), without those of scale 0. Throws
// sampling::InvalidParam ("lora") for an unknown id or name, an adapter chosen twice or a scale
// that is not finite.
std::vector<model::AdapterUse> resolve_adapters(const GenerationRequest& request,
                                                std::span<const NamedAdapter> adapters);

// One slot as GET /slots shows it: whether it serves a request, and how far that request got.
struct SlotState {
    int id = 0;
    bool processing = false;
    int32_t n_ctx = 0;          // tokens the slot holds at most
    int32_t cells = 0;          // tokens in the slot's memory now (cached prefix included)
    int32_t prompt_tokens = 0;  // the request's prompt
    int32_t decoded = 0;        // tokens generated so far
};

// What the server needs of a model's scheduler.
class Generator {
  public:
    virtual ~Generator() = default;
    // Takes the request or says why not (validate()'s verdict, or a full queue).
    virtual SubmitResult submit(GenerationRequest request) = 0;
    virtual int32_t context_size() const = 0;  // tokens per sequence
    // The LoRA adapters requests may choose now, in the order their ids number them. A snapshot:
    // set_adapters() replaces the list, never changes one a caller holds.
    virtual std::shared_ptr<const std::vector<NamedAdapter>> adapters() const {
        return std::make_shared<const std::vector<NamedAdapter>>();
    }
    // Replaces the adapters requests may choose from their next submit() on. Requests already
    // taken keep the adapters they resolved (each holds its adapter), so an adapter dropped here
    // is freed once the last request using it ends. Not for generators without adapters.
    virtual void set_adapters(std::vector<NamedAdapter> /*adapters*/) {
        throw std::logic_error("this model takes no LoRA adapters");
    }
    // Each slot's state as of the last step; safe from any thread (a snapshot, never torn per
    // field). Empty when the generator has no slots to show.
    virtual std::vector<SlotState> slot_states() const { return {}; }
    // Speculative decoding's settings for requests that do not choose.
    virtual SpeculativeParams speculative() const { return {}; }
};

}  // namespace ggufd::scheduler
