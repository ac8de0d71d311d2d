// llama-server's introspection, which its web UI, llama.vscode and other clients read: GET /props
// (the model's default generation settings, context, slots, chat template, modalities, build) and
// GET /slots (each slot's state). With several models, `?model=NAME` says which (the only model
// otherwise), as llama-server's router mode does.
#include <fmt/format.h>

#include "server/api.h"
#include "server/json_response.h"
#include "server/metrics/metrics.h"
#include "server/responses.h"

namespace ggufd::server {

using nlohmann::json;

namespace {

// llama-server's name for each sampler step, in the order ggufd runs them.
json sampler_order() {
    return json::array({"penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p",
                        "xtc", "temperature"});
}

// The settings a request gets for each field it leaves out, under llama-server's names (the chat
// endpoint's: no token limit but the context).
json default_params() {
    const sampling::SamplingParams s;
    const sampling::StopParams stop;
    return {{"n_predict", stop.max_tokens},
            {"seed", 4294967295u},  // llama-server's "random"
            {"temperature", s.temperature},
            {"dynatemp_range", s.dynatemp_range},
            {"dynatemp_exponent", s.dynatemp_exponent},
            {"top_k", s.top_k},
            {"top_p", s.top_p},
            {"min_p", s.min_p},
            {"top_n_sigma", s.top_n_sigma},
            {"xtc_probability", s.xtc_probability},
            {"xtc_threshold", s.xtc_threshold},
            {"typical_p", s.typical_p},
            {"repeat_last_n", s.penalty_last_n},
            {"repeat_penalty", s.repeat_penalty},
            {"presence_penalty", s.presence_penalty},
            {"frequency_penalty", s.frequency_penalty},
            {"dry_multiplier", s.dry_multiplier},
            {"dry_base", s.dry_base},
            {"dry_allowed_length", s.dry_allowed_length},
            {"dry_penalty_last_n", s.dry_penalty_last_n},
            {"dry_sequence_breakers", s.dry_sequence_breakers},
            {"mirostat", s.mirostat},
            {"mirostat_tau", s.mirostat_tau},
            {"mirostat_eta", s.mirostat_eta},
            {"stop", stop.stop},
            {"max_tokens", stop.max_tokens},
            {"n_keep", 0},
            {"n_discard", 0},
            {"ignore_eos", stop.ignore_eos},
            {"stream", false},
            {"n_probs", 0},
            {"min_keep", 0},
            {"grammar", ""},
            {"samplers", sampler_order()},
            {"timings_per_token", false},
            {"lora", json::array()}};
}

// A special token's text, "" when the vocabulary has none.
std::string token_text(const ModelBackend& model, int32_t id) {
    if (id < 0 || id >= model.vocab_size()) return {};
    return model.detokenize({id});
}

json slot_json(const scheduler::SlotState& s) {
    return {{"id", s.id},
            {"id_task", -1},
            {"n_ctx", s.n_ctx},
            {"speculative", false},
            {"is_processing", s.processing},
            {"n_prompt_tokens", s.prompt_tokens},
            {"n_cells", s.cells},
            {"next_token",
             {{"has_next_token", s.processing},
              {"has_new_line", false},
              {"n_remain", -1},
              {"n_decoded", s.decoded}}}};
}

}  // namespace

void Api::add_props_routes() {
    routes_.push_back({"GET", "/props", &Api::props, false});
    routes_.push_back({"GET", "/slots", &Api::slots, false});
}

void Api::props(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel,
                const std::string&) {
    const std::string name = request.query_param("model").value_or("");
    with_model(
        name, std::nullopt, request, channel,
        [this](const HttpRequest&, const std::shared_ptr<ResponseChannel>& to,
               std::shared_ptr<ModelLease> lease) {
            ModelBackend& model = lease->model();
            const std::vector<scheduler::SlotState> slots = model.generator().slot_states();
            json settings = {{"id", 0},
                             {"id_task", -1},
                             {"n_ctx", model.generator().context_size()},
                             {"speculative", false},
                             {"is_processing", false},
                             {"params", default_params()}};
            const json described = registry_.describe(model.name(), false).value_or(json());
            const tokenizer::SpecialTokens special = model.special_tokens();
            const metrics::BuildInfo build = metrics::BuildInfo::current();
            to->respond(json_response(200, {{"default_generation_settings", std::move(settings)},
                                            {"total_slots", slots.size()},
                                            {"model_alias", model.name()},
                                            {"model_path", described.value("path", "")},
                                            {"chat_template", model.chat_template()},
                                            {"modalities", {{"vision", false}, {"audio", false}}},
                                            {"bos_token", token_text(model, special.bos)},
                                            {"eos_token", token_text(model, special.eos)},
                                            {"build_info", fmt::format("ggufd {}", build.version)},
                                            {"is_sleeping", false}}));
        });
}

void Api::slots(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel,
                const std::string&) {
    const std::string name = request.query_param("model").value_or("");
    const std::optional<std::string> fail = request.query_param("fail_on_no_slot");
    const bool fail_on_no_slot = fail && *fail != "0" && *fail != "false";
    with_model(
        name, std::nullopt, request, channel,
        [this, fail_on_no_slot](const HttpRequest&, const std::shared_ptr<ResponseChannel>& to,
                                std::shared_ptr<ModelLease> lease) {
            json out = json::array();
            bool free = false;
            for (const scheduler::SlotState& s : lease->model().generator().slot_states()) {
                free = free || !s.processing;
                out.push_back(slot_json(s));
            }
            if (fail_on_no_slot && !free) {
                throw ApiError::unavailable("no slot is free", "no_slot_available",
                                            options_.retry_after_s);
            }
            to->respond(json_response(200, out));
        });
}

}  // namespace ggufd::server
