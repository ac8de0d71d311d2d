// What ggufd makes of a model file, for people: the hyperparameters that distinguish its
// architecture (GET /models, gguf-inspect), or why ggufd would refuse it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/model/hparams.h"
#include "gguf/file.h"

namespace ggufd::model {

// The hyperparameters as read (read_hparams), grouped and named as in the GGUF keys; features a
// model does not use are left out rather than shown as defaults.
nlohmann::ordered_json describe_hparams(const HParams& hp);

// {"supported": true, "hyperparameters": {...}} when ggufd would load the file, else
// {"supported": false, "reason": "..."}: the same checks as loading (hyperparameters, every
// tensor bound with its shape), without reading any weight.
nlohmann::ordered_json describe_support(const gguf::File& file);

}  // namespace ggufd::model
