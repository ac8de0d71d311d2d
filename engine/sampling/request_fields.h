// A generation request's fields, by the names OpenAI's and llama-server's APIs give them, read
// from JSON into the engine's SamplingParams and StopParams. Each field's type, range and message
// are stated here once: the HTTP API reads its bodies through this, and ggufd-run generate its
// flags, which it names after the same fields, so neither needs the other. A field no reader
// looks up is ignored (llama-server's sampling fields are each read or refused), and FieldReads
// (below) names it; `null` counts as absent; a field of the wrong type or out of range throws
// InvalidParam naming it, which the HTTP layer answers with a 400.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling/params.h"

namespace ggufd::sampling {

// Request bodies keep the client's key order, which the server passes on to chat templates.
using RequestJson = nlohmann::ordered_json;

// What one request may ask of the fields read here; the HTTP API's limits (server::ApiLimits)
// start from these.
struct FieldLimits {
    // `max_tokens` / `max_completion_tokens` per choice (the context size also bounds them).
    int32_t max_tokens = 32768;
    // `stop`: at most this many strings, each 1..max_stop_bytes bytes.
    int32_t max_stop = 4;
    size_t max_stop_bytes = 256;
    // `logit_bias` entries.
    int32_t max_logit_bias = 1024;
    // `dry_sequence_breakers`: at most this many strings, each 1..max_dry_breaker_bytes bytes.
    int32_t max_dry_breakers = 16;
    size_t max_dry_breaker_bytes = 64;
};

// The sampling fields (temperature, top_p, top_k, min_p, typical_p, presence_penalty,
// frequency_penalty, repeat_penalty, repeat_last_n, logit_bias, seed, and llama-server's dry_*,
// xtc_*, top_n_sigma, dynatemp_*, mirostat* and `samplers`, its order list, which may leave
// steps out of ggufd's fixed order but not reorder them), the stop fields (stop,
// ignore_eos, max_tokens, which defaults to `default_max_tokens`) and the output constraint: one
// of `response_format` (text, json_object, json_schema), llama-server's `grammar` (GBNF) and
// `json_schema`, which becomes sampling.grammar; a schema the converter refuses or a grammar that
// does not parse is refused saying where. `sampling` and `stop` come as constructed: a field the
// body leaves out keeps its default. `json_gbnf`, when given, receives the grammar's text when it
// is a JSON reply's (response_format, json_schema), which a chat reply's reasoning may precede.
// llama-server's sampling fields that ask for what ggufd does not do (min_keep above 1,
// grammar_lazy) are refused naming them, rather than ignored. (`n_probs` is an answer's field:
// llama-server's own routes read it, server/infill.h.)
void read_generation_fields(const RequestJson& body, const FieldLimits& limits,
                            int32_t default_max_tokens, SamplingParams& sampling, StopParams& stop,
                            std::string* json_gbnf = nullptr);

// The one mapping of what building an output grammar throws to an InvalidParam naming `param`;
// call it in a catch block (it rethrows anything else unchanged). `what` says where the grammar
// came from ("'json_schema'", "'tools'"): a schema the converter refuses is named by its JSON
// pointer, a grammar past the engine's limits is too large, GBNF the client wrote (`client_gbnf`)
// is invalid at its line and column, and any other std::invalid_argument says why.
[[noreturn]] void throw_grammar_error(std::string_view what, const char* param,
                                      bool client_gbnf = false);

// Readers of single fields, for the request fields the server reads beyond these, so that every
// field is checked the same way and says the same things.
namespace fields {

// The field when present and not null.
const RequestJson* field(const RequestJson& body, const char* name);
// The field, which the request must have.
const RequestJson& required(const RequestJson& body, const char* name);
bool get_bool(const RequestJson& body, const char* name, bool fallback);
enum class Low { closed, open };  // whether the lower bound itself is allowed
double get_number(const RequestJson& body, const char* name, double fallback, double lo, double hi,
                  Low low = Low::closed);
// An integer; a float with an integral value (16.0) counts as one.
bool as_integer(const RequestJson& v, int64_t& out);
int64_t get_int(const RequestJson& body, const char* name, int64_t fallback, int64_t lo,
                int64_t hi);
std::string string_value(const RequestJson& v, const char* name);
std::string get_string(const RequestJson& body, const char* name);

// Which of a request body's fields the parsers read. While a FieldReads lives on a thread, every
// lookup through field() (and so every reader above) on the body, or on an object inside it, is
// noted by its path, whether the field is there or not: the parsers' own lookups are the one
// list of the fields a route honours, so no second list can drift from them.
class FieldReads {
  public:
    explicit FieldReads(const RequestJson& body);
    ~FieldReads();
    FieldReads(const FieldReads&) = delete;
    FieldReads& operator=(const FieldReads&) = delete;

    // The body's fields no lookup asked for, as paths ("mirostat_foo", "options.num_gpu"): a
    // null field counts as absent; inside an object only when something was looked up in it (an
    // object handed on whole, a JSON Schema or chat_template_kwargs, is its reader's business);
    // never inside arrays (messages and tools go to the template as they are).
    std::vector<std::string> unread() const;

    struct Log;  // request_fields.cpp

  private:
    std::unique_ptr<Log> log_;
    Log* outer_;  // a FieldReads already active on this thread (restored at the end)
    const RequestJson& body_;
};

// Lookups on `copy`, a copy of `original` that a translation hands to the parsers instead, count
// as lookups of `original`'s fields, for the keys `copy` holds now (those it gets afterwards are
// the translation's own), until the FieldAlias ends; it must end before `copy` does. Nothing
// while no FieldReads is active.
class FieldAlias {
  public:
    FieldAlias(const RequestJson& copy, const RequestJson& original);
    ~FieldAlias();
    FieldAlias(const FieldAlias&) = delete;
    FieldAlias& operator=(const FieldAlias&) = delete;

  private:
    FieldReads::Log* log_;
    std::vector<const void*> registered_;
};

// Notes every field of `object` as read: for a translation that hands them all on as they are.
void note_all_read(const RequestJson& object);

}  // namespace fields

}  // namespace ggufd::sampling
