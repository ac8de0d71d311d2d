// bert: an encoder. Token, token-type (row 0) and learned position embeddings summed and
// LayerNormed; bidirectional attention through separate Q/K/V with biases and a biased output;
// each branch added to its input and then LayerNormed (attn_output_norm, layer_output_norm);
// up -> GELU -> down with biases; no output norm and no vocabulary head: the final hidden states
// are pooled into embeddings (pooling_type), or scored by the classifier head (rank).
#include "engine/model/arch/lineages.h"

namespace ggufd::model::arch {

extern constinit const ArchDesc bert = encoder(gpt2_layers({
    .name = "bert",
    .position = PositionKind::learned,
    .pooling = Pooling::cls,
}));

}  // namespace ggufd::model::arch
