// What the HTTP layer needs of a loaded model (the set of models is model_registry.h).
// The engine side (tokenizer, chat template, scheduler) implements ModelBackend; the server only
// sees this interface, so it can be tested with fakes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/family.h"
#include "chat/reply_rules.h"
#include "engine/model/arch.h"
#include "engine/scheduler/embedding.h"
#include "engine/scheduler/generation.h"
#include "engine/tokenizer/vocab.h"
#include "jinja/chat_template.h"

namespace ggufd::server {

// The chat template refused the conversation (its `raise_exception`, e.g. "roles must
// alternate"): the client's fault, answered with 400 and this message. Any other exception out of
// render_chat is a server bug (500).
class ChatTemplateError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// Every method is called from the I/O threads, several at once: implementations must be
// thread-safe and quick (tokenizing and rendering a template are fine; inference is not).
class ModelBackend {
  public:
    virtual ~ModelBackend() = default;

    // What clients put in "model".
    virtual std::string name() const = 0;

    // False while the model is loading: generation endpoints answer 503, /health too.
    virtual bool is_ready() const = 0;

    // For GET /models: {"id", "architecture", "parameters", "file_type", "context_length",
    // "size_bytes", "chat_template": bool, "general": {general.* keys}, ...}. With `full`, also
    // "metadata": every GGUF key except huge arrays. The server adds nothing; it passes this on.
    virtual nlohmann::json describe(bool full) const = 0;

    // Token ids must be < vocab_size(); the server checks ids from clients against it.
    virtual int32_t vocab_size() const = 0;

    // add_special: add BOS/EOS as the model's tokenizer says; parse_special: turn special-token
    // text ("<|im_start|>") into its id instead of tokenizing it as plain text.
    virtual std::vector<int32_t> tokenize(const std::string& text, bool add_special,
                                          bool parse_special) const = 0;

    // The bytes of the tokens, as UTF-8 (an incomplete trailing character is the caller's concern).
    virtual std::string detokenize(const std::vector<int32_t>& tokens) const = 0;

    // The prompt text from the model's chat template. `messages` is an array of {"role",
    // "content": string, ...} (content parts already joined to a string), `tools` null or an
    // array, `extra_context` an object of extra template variables (chat_template_kwargs).
    // The server tokenizes the result with add_special = false and parse_special = true: chat
    // templates write the BOS token themselves when the model wants one.
    // Throws ChatTemplateError when the template raises, std::runtime_error for other failures.
    // The JSON keeps the client's key order (ordered_json), so the template sees it unchanged.
    // Its content_ranges are the bytes of the text that came from the client (messages, tools,
    // extra_context).
    virtual jinja::Rendered render_chat(const nlohmann::ordered_json& messages,
                                        const nlohmann::ordered_json& tools,
                                        bool add_generation_prompt,
                                        const nlohmann::ordered_json& extra_context) const = 0;

    // Tokens of a prompt render_chat made: special-token text the template wrote becomes special
    // tokens, but text in the prompt's content ranges stays plain text, so a user cannot inject
    // "<|im_start|>system" into a conversation. The default ignores the ranges (for test
    // doubles).
    virtual std::vector<int32_t> tokenize_chat_prompt(const jinja::Rendered& prompt) const {
        return tokenize(prompt.text, /*add_special=*/false, /*parse_special=*/true);
    }

    // How the model writes reasoning and tool calls (detected from its chat template, or set by
    // --tool-parser), and whether its template reasons: chat/reply_rules.h follows them.
    virtual chat::TemplateTraits chat_traits() const { return {}; }
    chat::Family chat_family() const { return chat_traits().family; }
    // The chat template in use (the file's, or the one the server was given); "" when none.
    virtual std::string chat_template() const { return {}; }
    // The special tokens among that family's markup (control tokens, which decode to nothing
    // otherwise): chat replies keep their text so the output parser sees the calls.
    virtual std::vector<int32_t> chat_markup_tokens() const { return {}; }
    // The vocabulary's special tokens (kNoToken where it has none): fill-in-the-middle's among
    // them.
    virtual tokenizer::SpecialTokens special_tokens() const { return {}; }

    // Bytes of memory the loaded model holds (weights, KV cache, repacked copies), measured from
    // what it allocated and mapped; what --memory-budget counts.
    virtual uint64_t memory_bytes() const { return 0; }

    // The model's scheduler. submit() must not block (the server calls it on an I/O thread).
    virtual scheduler::Generator& generator() = 0;

    // Reads a LoRA adapter file made for this model (POST /v1/load_lora_adapter; the caller puts
    // it in generator()'s list). Throws with the reason when the file is not one.
    virtual std::shared_ptr<const model::LoraAdapter> read_adapter(
        const std::filesystem::path& /*path*/) const {
        throw std::invalid_argument("this model takes no LoRA adapters");
    }

    // --- embeddings and reranking ---
    // How the model pools its embeddings (its pooling_type, or --pooling): rank makes it a
    // reranker (POST /v1/rerank). nullopt: it serves no embeddings (the default, for doubles).
    virtual std::optional<model::Pooling> pooling() const { return std::nullopt; }
    // The scheduler's embedding side; only called when pooling() has a value.
    virtual scheduler::Embedder& embedder() {
        throw std::logic_error("this model serves no embeddings");
    }
    // The tokens of one query-document pair to score, as llama-server builds them: BOS, query,
    // EOS, SEP, document, EOS, each special token where the vocabulary has one.
    virtual std::vector<int32_t> rerank_pair(const std::string&, const std::string&) const {
        throw std::logic_error("this model does not rerank");
    }
};

}  // namespace ggufd::server
