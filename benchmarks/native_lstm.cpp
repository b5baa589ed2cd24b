// A native bidirectional LSTM forward for inference, as an experiment against oneDNN's kernel
// (benchmarks/native_lstm.py builds it with torch.utils.cpp_extension and times it).
//
// The straightforward design: the input projection of every token as one product, then per
// step one GEMM (at::addmm_out: the step's input part plus h_{t-1} W_hh^T) and one pass of
// ATen's vectorised math over the gates (sigmoid, tanh, c_t, h_t), written straight into the
// output. `parts` switches pieces off, to time them: 1 = the step GEMMs, 2 = the gate math,
// 3 = both (the whole LSTM); the input projection always runs.
#include <torch/extension.h>
#include <ATen/cpu/vec/vec.h>

using Vec = at::vec::Vectorized<float>;

static inline Vec sigmoid(Vec x) { return Vec(1.0f) / (Vec(1.0f) + x.neg().exp()); }

static inline void cell(const float* g, float* c, float* h, float* out, int64_t H, int64_t j,
                        int64_t count) {
  Vec i = sigmoid(Vec::loadu(g + j, count));
  Vec f = sigmoid(Vec::loadu(g + H + j, count));
  Vec cand = Vec::loadu(g + 2 * H + j, count).tanh();
  Vec o = sigmoid(Vec::loadu(g + 3 * H + j, count));
  Vec c_t = f * Vec::loadu(c + j, count) + i * cand;
  Vec h_t = o * c_t.tanh();
  c_t.store(c + j, count);
  h_t.store(h + j, count);
  h_t.store(out + j, count);
}

// x: (n, T, E) contiguous float32, every sequence T long; w_ih: (D, 4H, E); w_hh: (D, 4H, H);
// bias: (D, 4H) = b_ih + b_hh. Returns (n, T, D*H), gates in PyTorch's order i, f, g, o.
torch::Tensor lstm_forward(torch::Tensor x, torch::Tensor w_ih, torch::Tensor w_hh,
                           torch::Tensor bias, int64_t parts) {
  TORCH_CHECK(x.dim() == 3 && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
              "x must be a contiguous float32 (n, T, E) tensor");
  const int64_t n = x.size(0), T = x.size(1), E = x.size(2);
  const int64_t D = w_ih.size(0), G = w_ih.size(1), H = G / 4;
  auto out = torch::empty({n, T, D * H}, x.options());
  auto pre = at::addmm(bias.reshape({D * G}), x.reshape({n * T, E}),
                       w_ih.reshape({D * G, E}).t()).view({n, T, D * G});  // (n, T, D*4H)
  auto gates = torch::empty({n, G}, x.options());
  auto h = torch::empty({n, H}, x.options());
  auto c = torch::empty({n, H}, x.options());
  const int64_t width = Vec::size();
  for (int64_t d = 0; d < D; ++d) {
    auto w_hh_t = w_hh[d].t();  // (H, 4H)
    h.zero_();
    c.zero_();
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = d == 0 ? s : T - 1 - s;
      auto pre_t = pre.select(1, t).narrow(1, d * G, G);  // (n, 4H), strided
      if (parts & 1) {
        if (s == 0) {
          gates.copy_(pre_t);
        } else {
          at::addmm_out(gates, pre_t, h, w_hh_t);
        }
      }
      if (!(parts & 2)) continue;
      const float* pg = gates.data_ptr<float>();
      float* ph = h.data_ptr<float>();
      float* pc = c.data_ptr<float>();
      float* po = out.data_ptr<float>();
      for (int64_t r = 0; r < n; ++r) {
        const float* g = pg + r * G;
        float* o = po + (r * T + t) * D * H + d * H;
        int64_t j = 0;
        for (; j + width <= H; j += width) cell(g, pc + r * H, ph + r * H, o, H, j, width);
        if (j < H) cell(g, pc + r * H, ph + r * H, o, H, j, H - j);
      }
    }
  }
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("lstm_forward", &lstm_forward, "bidirectional LSTM forward (inference)");
}
