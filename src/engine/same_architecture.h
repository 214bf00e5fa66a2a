// same_architecture: whether a model can replace another's weights in a running engine
// (Engine::replace_model, weight updates, wake from sleep): every field that shapes the forward
// and the KV memory is equal. Thread safety: a pure function.
#pragma once

#include "core/status.h"
#include "model/model_config.h"

namespace vosti {

// The first architecture field in which two models differ, named (kInvalidArgument); ok when none
// does.
Status same_architecture(const ModelConfig& a, const ModelConfig& b);

}  // namespace vosti
