// Qwen3-VL's deepstack (ArchDesc::deepstack): an image token's input row carries, after the
// embedding the first block reads, one slice per deepstack layer: slice k + 1 joins the residual
// stream after block k. Text tokens (no input row) add nothing.
#include "engine/kernels/ops.h"
#include "engine/model/blocks/block.h"

namespace ggufd::model {

namespace {

class DeepstackBlock : public Block {
  public:
    DeepstackBlock(int64_t n_embd, int64_t n_embd_inp, int layer)
        : n_embd_(n_embd), n_embd_inp_(n_embd_inp), layer_(layer) {}

    void forward(const Step& step, float* x) override {
        if (step.inputs.empty()) return;
        const int64_t offset = (layer_ + 1) * n_embd_;
        if (offset + n_embd_ > n_embd_inp_) return;
        for (int64_t i = 0; i < step.n; ++i) {
            const float* in = step.inputs[static_cast<size_t>(i)];
            if (in) kernels::add(x + i * n_embd_, in + offset, x + i * n_embd_, n_embd_);
        }
    }

  private:
    const int64_t n_embd_, n_embd_inp_;
    const int layer_;
};

}  // namespace

std::unique_ptr<Block> make_deepstack_block(const BlockEnv& env, int layer) {
    const HParams& hp = env.model.hparams();
    if (!hp.desc->deepstack || layer < 0 || static_cast<uint32_t>(layer) >= hp.n_deepstack)
        return nullptr;
    return std::make_unique<DeepstackBlock>(hp.n_embd, hp.n_embd_inp(), layer);
}

}  // namespace ggufd::model
