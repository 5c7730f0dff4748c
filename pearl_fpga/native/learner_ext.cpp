// learner_ext.cpp: the small fused pieces of a CPU learner step (pearl_fpga._learner_native).
//
// A DQN gradient step on a 64-sample batch is a handful of large GEMMs (done by torch, i.e. MKL)
// and a few dozen small element-wise ops around them (TD target, Huber loss and its derivative,
// bias gradients, ReLU masks, gradient clipping, Adam). Run as separate torch ops, each of those
// costs more in dispatch and allocation than in arithmetic; here each group is one pass over
// caller-owned float32 buffers (numpy views of the learner's torch tensors, nothing allocated).
// pearl_fpga/algos/fused.py drives it for DQN, DDPG and TD3, algos/sac.py for SAC; tests/test_fused_learner.py
// and tests/test_sac_fused.py check it against autograd and torch.optim.Adam. The loops over layer-sized
// arrays release the GIL, so that TD3's two critics (or DDPG's actor and critic) run them on two threads
// at once. `gemms` runs a step's independent GEMMs on the caller and a spinning native helper thread
// (worker_pool.h) without the GIL, through the BLAS routine torch itself calls (handed over by set_blas).
// A `Program` records a part of a step (these pieces and torch's GEMMs) and runs it with the GIL released
// once (algos/fused_net.py's passes, the actor-critic steps' thread parts, DQN's whole step).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "isa.h"
#include "worker_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace py = pybind11;

namespace {

// A C-contiguous float32 numpy array (no conversion: outputs must be the caller's own buffers).
struct FloatView {
    float* data;
    py::ssize_t rows, cols;  // 1-D arrays have cols == 1, 0-D ones are 1 x 1
};

FloatView float_view(const py::handle& obj, const char* name, bool writable) {
    if (!py::isinstance<py::array_t<float>>(obj))
        throw py::type_error(std::string(name) + " must be a float32 numpy array");
    auto arr = py::reinterpret_borrow<py::array>(obj);
    if (!(arr.flags() & py::array::c_style))
        throw py::value_error(std::string(name) + " must be C-contiguous");
    if (writable && !arr.writeable()) throw py::value_error(std::string(name) + " must be writable");
    if (arr.ndim() > 2) throw py::value_error(std::string(name) + " must be 0-D, 1-D or 2-D");
    py::ssize_t rows = arr.ndim() >= 1 ? arr.shape(0) : 1, cols = arr.ndim() == 2 ? arr.shape(1) : 1;
    return {static_cast<float*>(arr.mutable_data()), rows, cols};
}

// A C-contiguous array of bfloat16 values held as 16-bit integers (a torch bfloat16 tensor's
// .view(torch.int16).numpy()), or nullptr data for None (the optional low-precision copies).
struct Bf16View {
    std::uint16_t* data;
    py::ssize_t rows, cols;
};

Bf16View bf16_view(const py::handle& obj, const char* name, bool writable) {
    if (obj.is_none()) return {nullptr, 0, 0};
    if (!py::isinstance<py::array_t<std::int16_t>>(obj) && !py::isinstance<py::array_t<std::uint16_t>>(obj))
        throw py::type_error(std::string(name) + " must be a 16-bit integer numpy array (bfloat16 bits)");
    auto arr = py::reinterpret_borrow<py::array>(obj);
    if (!(arr.flags() & py::array::c_style))
        throw py::value_error(std::string(name) + " must be C-contiguous");
    if (writable && !arr.writeable()) throw py::value_error(std::string(name) + " must be writable");
    if (arr.ndim() != 2) throw py::value_error(std::string(name) + " must be 2-D");
    return {static_cast<std::uint16_t*>(arr.mutable_data()), arr.shape(0), arr.shape(1)};
}

// A view's shape, or a ValueError naming it (a None bfloat16 view, an absent optional copy, passes).
template <typename View>
void expect_shape(const View& v, py::ssize_t rows, py::ssize_t cols, const char* name) {
    if constexpr (std::is_same_v<View, Bf16View>)
        if (v.data == nullptr) return;
    if (v.rows != rows || v.cols != cols)
        throw py::value_error(std::string(name) + " has shape (" + std::to_string(v.rows) + ", " +
                              std::to_string(v.cols) + "), expected (" + std::to_string(rows) + ", " +
                              std::to_string(cols) + ")");
}

// A (B,) or (B, 1) float32 array, or nullptr for None (optional per-sample inputs and outputs).
float* optional_column(const py::handle& obj, py::ssize_t B, const char* name, bool writable) {
    if (obj.is_none()) return nullptr;
    FloatView v = float_view(obj, name, writable);
    expect_shape(v, B, 1, name);
    return v.data;
}

// A piece's arithmetic, its arguments checked and bound: a module function runs it at once, a Program later.
using Op = std::function<void()>;

// Per-piece timing (`bench learner --profile`): off unless asked; when on, each piece a module function runs or a
// program records from then on is wrapped in two clock reads, summed per piece name over every thread that runs it.
struct PieceTime {
    std::atomic<long long> ns{0};
    std::atomic<long long> calls{0};
};
std::map<std::string, PieceTime>& piece_times() {
    static std::map<std::string, PieceTime> times;
    return times;
}
bool timing_pieces = false;

// Turns piece timing on or off (for pieces run or recorded from now on) and returns the times summed so far, by
// piece: {name: (calls, seconds)}, then forgets them.
py::dict time_pieces(bool on) {
    py::dict out;
    for (auto& [name, time] : piece_times())
        if (time.calls.load() > 0)
            out[py::str(name)] =
                py::make_tuple(time.calls.exchange(0), 1e-9 * static_cast<double>(time.ns.exchange(0)));
    timing_pieces = on;
    return out;
}

// `op`, the piece `name`, timed when piece timing is on (GEMMs excepted: torch's profiler sees them). Under the GIL.
Op timed(const char* name, Op op) {
    if (!timing_pieces || std::strcmp(name, "gemm") == 0) return op;
    PieceTime* time = &piece_times()[name];  // a map's node stays where it is
    return [op = std::move(op), time] {
        const auto start = std::chrono::steady_clock::now();
        op();
        const auto took = std::chrono::steady_clock::now() - start;
        time->ns += std::chrono::duration_cast<std::chrono::nanoseconds>(took).count();
        time->calls += 1;
    };
}

// A module function's piece `name`, run at once with the GIL released.
void run_released(const char* name, Op op) {
    op = timed(name, std::move(op));
    py::gil_scoped_release release;
    op();
}

// Double-DQN (or max) TD target, smooth-L1 loss and dLoss/dQ in one pass over the batch.
// q: (B, A) online Q of the sampled states; q_next_online: (B, A) online Q of the next states (only
// read when double_q); q_next_target: (B, A); action: (B,) int64; reward, done: (B,); weights:
// (B,) importance weights or None. Writes d_q (B, A) (zero except at the taken action) and
// abs_td (B,); returns the loss, mean over the batch of weight * huber(td).
// (The loss into *loss_out when the op runs; every action is checked first, so a bad one changes nothing.)
Op dqn_loss_grad_op(py::handle q_obj, py::handle q_next_online_obj, py::handle q_next_target_obj,
                    const py::array_t<int64_t, py::array::c_style>& action, py::handle reward_obj, py::handle done_obj,
                    py::handle weights_obj, double gamma, bool double_q, py::handle d_q_obj, py::handle abs_td_obj,
                    double* loss_out) {
    FloatView q = float_view(q_obj, "q", false);
    const py::ssize_t B = q.rows, A = q.cols;
    FloatView qt = float_view(q_next_target_obj, "q_next_target", false);
    expect_shape(qt, B, A, "q_next_target");
    FloatView qo = qt;
    if (double_q) {
        qo = float_view(q_next_online_obj, "q_next_online", false);
        expect_shape(qo, B, A, "q_next_online");
    }
    FloatView reward = float_view(reward_obj, "reward", false), done = float_view(done_obj, "done", false);
    expect_shape(reward, B, 1, "reward");
    expect_shape(done, B, 1, "done");
    const float* w = optional_column(weights_obj, B, "weights", false);
    FloatView d_q = float_view(d_q_obj, "d_q", true), abs_td = float_view(abs_td_obj, "abs_td", true);
    expect_shape(d_q, B, A, "d_q");
    expect_shape(abs_td, B, 1, "abs_td");
    if (action.ndim() != 1 || action.shape(0) != B) throw py::value_error("action must have shape (B,)");
    const int64_t* act = action.data();
    for (py::ssize_t i = 0; i < B; ++i)
        if (act[i] < 0 || act[i] >= A) throw py::value_error("action " + std::to_string(act[i]) + " out of range");

    const float g = static_cast<float>(gamma), inv_b = 1.0f / static_cast<float>(B);
    return [q, qt, qo, reward, done, w, d_q, abs_td, act, double_q, g, inv_b, B, A, loss_out] {
        std::fill(d_q.data, d_q.data + B * A, 0.0f);
        double loss = 0.0;
        for (py::ssize_t i = 0; i < B; ++i) {
            const int64_t ai = act[i];
            const float* t_row = qt.data + i * A;
            float next;
            if (double_q) {  // the online network picks the action (first maximum, as torch.argmax), the target
                             // values it
                const float* o_row = qo.data + i * A;
                py::ssize_t best = 0;
                for (py::ssize_t a = 1; a < A; ++a)
                    if (o_row[a] > o_row[best]) best = a;
                next = t_row[best];
            } else {
                next = *std::max_element(t_row, t_row + A);
            }
            const float target = reward.data[i] + (1.0f - done.data[i]) * g * next;
            const float td = q.data[i * A + ai] - target;
            const float a_td = std::fabs(td);
            float huber = a_td < 1.0f ? 0.5f * td * td : a_td - 0.5f;
            float grad = std::min(std::max(td, -1.0f), 1.0f);
            if (w) {
                huber *= w[i];
                grad *= w[i];
            }
            loss += huber;
            d_q.data[i * A + ai] = grad * inv_b;
            abs_td.data[i] = a_td;
        }
        *loss_out = loss / static_cast<double>(B);
    };
}
double dqn_loss_grad(py::handle q_obj, py::handle q_next_online_obj, py::handle q_next_target_obj,
                     py::array_t<int64_t, py::array::c_style> action, py::handle reward_obj, py::handle done_obj,
                     py::handle weights_obj, double gamma, bool double_q, py::handle d_q_obj, py::handle abs_td_obj) {
    double loss = 0.0;
    // (B, A): with the GIL
    timed("dqn_loss_grad", dqn_loss_grad_op(q_obj, q_next_online_obj, q_next_target_obj, action, reward_obj, done_obj,
                                            weights_obj, gamma, double_q, d_q_obj, abs_td_obj, &loss))();
    return loss;
}

// The hot loops, compiled for AVX-512, AVX2 and baseline x86-64; the module's import points each at the
// widest the CPU has (within PEARL_FPGA_NATIVE_ISA, isa.h). Same results on each: no FMA contraction
// (-ffp-contract=off), sqrt and division are exact. Each body is force-inlined into one wrapper per
// instruction set.
#if defined(__x86_64__) && defined(__GNUC__)
#define PEARL_ISA_VARIANTS(ret, fn, params, args)                                                    \
    __attribute__((target("avx512f,avx512bw"))) ret fn##_avx512 params { return fn##_body args; }   \
    __attribute__((target("avx2,bmi2"))) ret fn##_avx2 params { return fn##_body args; }             \
    ret fn##_scalar params { return fn##_body args; }                                                  \
    ret(*fn) params = fn##_scalar;                                                                     \
    void fn##_select(pearl_isa::Isa isa) {                                                             \
        fn = isa == pearl_isa::Isa::AVX512 ? fn##_avx512 : isa == pearl_isa::Isa::AVX2 ? fn##_avx2 : fn##_scalar; \
    }
#else
#define PEARL_ISA_VARIANTS(ret, fn, params, args) \
    ret(*fn) params = fn##_body;                  \
    void fn##_select(pearl_isa::Isa) {}
#endif
#define PEARL_BODY [[gnu::always_inline]] inline

// Sixteen floats as one value (GCC's and Clang's vector extension): one AVX-512 register, two AVX2 ones or
// four SSE ones, whichever the wrapper's target has; element-wise IEEE arithmetic, so the same bits on each.
typedef float Floats16 __attribute__((vector_size(64)));

PEARL_BODY float dot_body(const float* a, const float* b, py::ssize_t n) {
    Floats16 part = {}, va, vb;  // sixteen partial sums: one order on every ISA
    py::ssize_t i = 0;
    for (; i + 16 <= n; i += 16) {
        std::memcpy(&va, a + i, sizeof va);
        std::memcpy(&vb, b + i, sizeof vb);
        part += va * vb;
    }
    for (; i < n; ++i) part[0] += a[i] * b[i];
    float sum = 0.0f;
    for (int l = 0; l < 16; ++l) sum += part[l];
    return sum;
}
PEARL_ISA_VARIANTS(float, dot, (const float* a, const float* b, py::ssize_t n), (a, b, n))

PEARL_BODY void adam_update_body(float* p, float* grad, float* m, float* v, py::ssize_t size, float clip, float wd,
                                 float b1, float b2, float eps, float step_size, float bias2_sqrt) {
    for (py::ssize_t i = 0; i < size; ++i) {
        float g = grad[i] * clip;
        grad[i] = g;  // leave the clipped gradient, as clip_grad_norm_ does
        g += wd * p[i];
        m[i] = b1 * m[i] + (1.0f - b1) * g;
        v[i] = b2 * v[i] + (1.0f - b2) * g * g;
        p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bias2_sqrt + eps);
    }
}
PEARL_ISA_VARIANTS(void, adam_update,
                   (float* p, float* grad, float* m, float* v, py::ssize_t size, float clip, float wd, float b1,
                    float b2, float eps, float step_size, float bias2_sqrt),
                   (p, grad, m, v, size, clip, wd, b1, b2, eps, step_size, bias2_sqrt))

// ---- element-wise passes around the GEMMs: wide, so vectorized per instruction set -----------------

// db = column sums of d (B, N), row by row (the same order on every path).
PEARL_BODY void column_sums_body(const float* d, float* db, py::ssize_t rows, py::ssize_t cols) {
    std::fill(db, db + cols, 0.0f);
    for (py::ssize_t i = 0; i < rows; ++i) {
        const float* row = d + i * cols;
        for (py::ssize_t j = 0; j < cols; ++j) db[j] += row[j];
    }
}
PEARL_ISA_VARIANTS(void, column_sums, (const float* d, float* db, py::ssize_t rows, py::ssize_t cols),
                   (d, db, rows, cols))

// bfloat16 is the upper half of a float32: widening is exact. Narrowing rounds to nearest, ties to even, on
// the bits, as torch's vectorized conversion does (NaN becomes 0xFFFF; subnormals are kept, not flushed).
PEARL_BODY float bf16_to_float(std::uint16_t h) {
    const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
PEARL_BODY std::uint16_t float_to_bf16(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    const std::uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    return (u & 0x7FFFFFFFu) > 0x7F800000u ? std::uint16_t{0xFFFF} : static_cast<std::uint16_t>(rounded);
}

// out = (src, widened from bfloat16, or out itself when src is nullptr) + b per row, then ReLU when relu (NaN
// becomes 0, as the torch step's ReLU mask does); low, when not nullptr, = out narrowed to bfloat16 (the next
// wide layer's GEMM operand). out (rows, cols), b (cols,).
PEARL_BODY void add_bias_relu_body(float* out, const float* b, py::ssize_t rows, py::ssize_t cols, bool relu,
                                   const std::uint16_t* src, std::uint16_t* low) {
    for (py::ssize_t i = 0; i < rows; ++i) {
        float* o = out + i * cols;
        const std::uint16_t* s = src ? src + i * cols : nullptr;
        for (py::ssize_t n = 0; n < cols; ++n) {
            const float v = (s ? bf16_to_float(s[n]) : o[n]) + b[n];
            o[n] = relu && !(v > 0.0f) ? 0.0f : v;
        }
        if (low)
            for (py::ssize_t n = 0; n < cols; ++n) low[i * cols + n] = float_to_bf16(o[n]);
    }
}
PEARL_ISA_VARIANTS(void, add_bias_relu,
                   (float* out, const float* b, py::ssize_t rows, py::ssize_t cols, bool relu,
                    const std::uint16_t* src, std::uint16_t* low),
                   (out, b, rows, cols, relu, src, low))

// d = (src widened, or d itself when src is nullptr) where keep > 0, else 0 (n elements): a ReLU (keep = d) or
// its backward pass (keep = its output); low, when not nullptr, = the result narrowed to bfloat16.
PEARL_BODY void keep_positive_body(float* d, const float* keep, py::ssize_t n, const std::uint16_t* src,
                                   std::uint16_t* low) {
    for (py::ssize_t k = 0; k < n; ++k) d[k] = keep[k] > 0.0f ? (src ? bf16_to_float(src[k]) : d[k]) : 0.0f;
    if (low)
        for (py::ssize_t k = 0; k < n; ++k) low[k] = float_to_bf16(d[k]);
}
PEARL_ISA_VARIANTS(void, keep_positive,
                   (float* d, const float* keep, py::ssize_t n, const std::uint16_t* src, std::uint16_t* low),
                   (d, keep, n, src, low))

// low = src narrowed to bfloat16 (n elements).
PEARL_BODY void narrow_body(const float* src, std::uint16_t* low, py::ssize_t n) {
    for (py::ssize_t k = 0; k < n; ++k) low[k] = float_to_bf16(src[k]);
}
PEARL_ISA_VARIANTS(void, narrow, (const float* src, std::uint16_t* low, py::ssize_t n), (src, low, n))

// db = column sums of d (B, N).
Op bias_grad_op(py::handle d_obj, py::handle db_obj) {
    FloatView d = float_view(d_obj, "d", false), db = float_view(db_obj, "db", true);
    expect_shape(db, d.cols, 1, "db");
    return [d, db] { column_sums(d.data, db.data, d.rows, d.cols); };
}
void bias_grad(py::handle d_obj, py::handle db_obj) { run_released("bias_grad", bias_grad_op(d_obj, db_obj)); }

// out += b per row (then ReLU when relu): the bias and activation after a GEMM that wrote out = x W^T, in one
// pass instead of a bias copy before the GEMM and a ReLU after it. out (R, N), b (N,). src: the GEMM's result in
// bfloat16 (R, N), read instead of out (a bfloat16 GEMM's widening in the same pass); out_low: out narrowed to
// bfloat16 as well (the next layer's GEMM operand).
Op bias_relu_op(py::handle out_obj, py::handle b_obj, bool relu, py::handle src_obj, py::handle out_low_obj) {
    FloatView out = float_view(out_obj, "out", true), b = float_view(b_obj, "b", false);
    expect_shape(b, out.cols, 1, "b");
    Bf16View src = bf16_view(src_obj, "src", false), low = bf16_view(out_low_obj, "out_low", true);
    expect_shape(src, out.rows, out.cols, "src");
    expect_shape(low, out.rows, out.cols, "out_low");
    return [out, b, relu, src, low] { add_bias_relu(out.data, b.data, out.rows, out.cols, relu, src.data, low.data); };
}
void bias_relu(py::handle out_obj, py::handle b_obj, bool relu, py::handle src_obj, py::handle out_low_obj) {
    run_released("bias_relu", bias_relu_op(out_obj, b_obj, relu, src_obj, out_low_obj));
}

// d *= (a > 0): the ReLU's backward pass, a being the ReLU's output. src: the gradient's GEMM result in bfloat16,
// read instead of d; out_low: d narrowed to bfloat16 as well (the layer's GEMM operand).
Op relu_backward_op(py::handle d_obj, py::handle a_obj, py::handle src_obj, py::handle out_low_obj) {
    FloatView d = float_view(d_obj, "d", true), a = float_view(a_obj, "a", false);
    expect_shape(a, d.rows, d.cols, "a");
    Bf16View src = bf16_view(src_obj, "src", false), low = bf16_view(out_low_obj, "out_low", true);
    expect_shape(src, d.rows, d.cols, "src");
    expect_shape(low, d.rows, d.cols, "out_low");
    return [d, a, src, low] { keep_positive(d.data, a.data, d.rows * d.cols, src.data, low.data); };
}
void relu_backward(py::handle d_obj, py::handle a_obj, py::handle src_obj, py::handle out_low_obj) {
    run_released("relu_backward", relu_backward_op(d_obj, a_obj, src_obj, out_low_obj));
}

// low = src narrowed to bfloat16, or out = low widened to float32 (the same shape).
Op narrow_op(py::handle src_obj, py::handle low_obj) {
    FloatView src = float_view(src_obj, "src", false);
    Bf16View low = bf16_view(low_obj, "low", true);
    if (low.data == nullptr) throw py::value_error("low must be a bfloat16 array's bits, not None");
    expect_shape(low, src.rows, src.cols, "low");
    return [src, low] { narrow(src.data, low.data, src.rows * src.cols); };
}
Op widen_op(py::handle low_obj, py::handle out_obj) {
    Bf16View low = bf16_view(low_obj, "low", false);
    if (low.data == nullptr) throw py::value_error("low must be a bfloat16 array's bits, not None");
    FloatView out = float_view(out_obj, "out", true);
    expect_shape(out, low.rows, low.cols, "out");
    return [low, out] {
        for (py::ssize_t k = 0; k < out.rows * out.cols; ++k) out.data[k] = bf16_to_float(low.data[k]);
    };
}

// ---- thin layers: a side of at most a few dozen (the network's input and output layers) --------
// MKL spends more time dispatching these than computing them; these loops vectorize along the long
// side, keep a fixed summation order, and make one pass over each output row while it is in L1.

PEARL_BODY void axpy_body(float* y, float alpha, const float* x, py::ssize_t n) {
    Floats16 vy, vx;
    py::ssize_t i = 0;
    for (; i + 16 <= n; i += 16) {
        std::memcpy(&vy, y + i, sizeof vy);
        std::memcpy(&vx, x + i, sizeof vx);
        vy += alpha * vx;
        std::memcpy(y + i, &vy, sizeof vy);
    }
    for (; i < n; ++i) y[i] += alpha * x[i];
}

// Few inputs, many outputs (an input layer): out row i = b + x[i, 0] wt row 0 + x[i, 1] wt row 1 + ... (then
// ReLU), sixteen outputs at a time in registers: x (R, K), wt = W^T (K, N), b (N,), out (R, N).
PEARL_BODY void thin_wide_rows_body(const float* x, const float* wt, const float* b, float* out, py::ssize_t R,
                                    py::ssize_t K, py::ssize_t N, bool relu) {
    const Floats16 zero = {};
    for (py::ssize_t i = 0; i < R; ++i) {
        const float* xi = x + i * K;
        float* o = out + i * N;
        py::ssize_t n = 0;
        for (; n + 16 <= N; n += 16) {
            Floats16 acc, w;
            std::memcpy(&acc, b + n, sizeof acc);
            for (py::ssize_t k = 0; k < K; ++k) {
                std::memcpy(&w, wt + k * N + n, sizeof w);
                acc += xi[k] * w;
            }
            if (relu) acc = acc > zero ? acc : zero;
            std::memcpy(o + n, &acc, sizeof acc);
        }
        for (; n < N; ++n) {
            float acc = b[n];
            for (py::ssize_t k = 0; k < K; ++k) acc += xi[k] * wt[k * N + n];
            o[n] = relu && !(acc > 0.0f) ? 0.0f : acc;
        }
    }
}
PEARL_ISA_VARIANTS(void, thin_wide_rows,
                   (const float* x, const float* wt, const float* b, float* out, py::ssize_t R, py::ssize_t K,
                    py::ssize_t N, bool relu),
                   (x, wt, b, out, R, K, N, relu))

// Many inputs, few outputs: out[i, n] = b[n] + dot(x row i, w row n) (then ReLU; b nullptr: no bias, no ReLU).
PEARL_BODY void thin_dots_body(const float* x, const float* w, const float* b, float* out, py::ssize_t R,
                               py::ssize_t K, py::ssize_t N, bool relu) {
    for (py::ssize_t i = 0; i < R; ++i)
        for (py::ssize_t n = 0; n < N; ++n) {
            const float d = dot_body(x + i * K, w + n * K, K);
            const float v = b ? b[n] + d : d;
            out[i * N + n] = relu && !(v > 0.0f) ? 0.0f : v;
        }
}
PEARL_ISA_VARIANTS(void, thin_dots,
                   (const float* x, const float* w, const float* b, float* out, py::ssize_t R, py::ssize_t K,
                    py::ssize_t N, bool relu),
                   (x, w, b, out, R, K, N, relu))

// Rows of sums of scaled rows: out row i = 0 + c[i, 0] v row 0 + c[i, 1] v row 1 + ... (c (R, N), v (N, K),
// out (R, K)), then out *= (mask > 0) row by row when mask is not nullptr.
PEARL_BODY void thin_combine_rows_body(const float* c, const float* v, const float* mask, float* out, py::ssize_t R,
                                       py::ssize_t N, py::ssize_t K) {
    for (py::ssize_t i = 0; i < R; ++i) {
        float* o = out + i * K;
        std::fill(o, o + K, 0.0f);
        for (py::ssize_t n = 0; n < N; ++n) axpy_body(o, c[i * N + n], v + n * K, K);
        if (mask)
            for (py::ssize_t k = 0; k < K; ++k) o[k] = mask[i * K + k] > 0.0f ? o[k] : 0.0f;
    }
}
PEARL_ISA_VARIANTS(void, thin_combine_rows,
                   (const float* c, const float* v, const float* mask, float* out, py::ssize_t R, py::ssize_t N,
                    py::ssize_t K),
                   (c, v, mask, out, R, N, K))

// dw (N, K) += d[i, n] a row i over the rows i of d (B, N) and a (B, K), from zero: a weight gradient d^T a
// with a long K. With a long N, the same on the transpose: dw^T (K, N) += a[i, k] d row i.
PEARL_BODY void outer_sums_body(const float* d, const float* a, float* dw, py::ssize_t B, py::ssize_t N,
                                py::ssize_t K) {
    std::fill(dw, dw + N * K, 0.0f);
    for (py::ssize_t i = 0; i < B; ++i)
        for (py::ssize_t n = 0; n < N; ++n) axpy_body(dw + n * K, d[i * N + n], a + i * K, K);
}
PEARL_ISA_VARIANTS(void, outer_sums, (const float* d, const float* a, float* dw, py::ssize_t B, py::ssize_t N,
                                      py::ssize_t K),
                   (d, a, dw, B, N, K))

// The (K, N) transpose of w (N, K), for the loops above that run along N.
std::vector<float> transposed(const FloatView& w) {
    const py::ssize_t N = w.rows, K = w.cols;
    std::vector<float> wt(static_cast<size_t>(K * N));
    for (py::ssize_t n = 0; n < N; ++n)
        for (py::ssize_t k = 0; k < K; ++k) wt[k * N + n] = w.data[n * K + k];
    return wt;
}

// linear_thin's arithmetic (called without the GIL).
void linear_thin_loops(const FloatView& x, const FloatView& w, const FloatView& b, const FloatView& out, bool relu) {
    const py::ssize_t R = x.rows, K = x.cols, N = w.rows;
    if (N >= K) {  // long outputs: out row = b + sum over k of x[i, k] (row k of W^T)
        const std::vector<float> wt = transposed(w);
        thin_wide_rows(x.data, wt.data(), b.data, out.data, R, K, N, relu);
    } else {  // long inputs: one dot product per output
        thin_dots(x.data, w.data, b.data, out.data, R, K, N, relu);
    }
}

// out = x W^T + b (then ReLU when relu): x (R, K), W (N, K), b (N,), out (R, N); out_low: out narrowed to
// bfloat16 as well (the next layer's GEMM operand in a bfloat16 step), or None.
Op linear_thin_op(py::handle x_obj, py::handle w_obj, py::handle b_obj, py::handle out_obj, bool relu,
                   py::handle out_low_obj) {
    FloatView x = float_view(x_obj, "x", false), w = float_view(w_obj, "w", false);
    FloatView b = float_view(b_obj, "b", false), out = float_view(out_obj, "out", true);
    const py::ssize_t R = x.rows, K = x.cols, N = w.rows;
    expect_shape(w, N, K, "w");
    expect_shape(b, N, 1, "b");
    expect_shape(out, R, N, "out");
    Bf16View low = bf16_view(out_low_obj, "out_low", true);
    expect_shape(low, R, N, "out_low");
    return [x, w, b, out, relu, low] {
        linear_thin_loops(x, w, b, out, relu);
        if (low.data) narrow(out.data, low.data, out.rows * out.cols);
    };
}
void linear_thin(py::handle x_obj, py::handle w_obj, py::handle b_obj, py::handle out_obj, bool relu,
                 py::handle out_low_obj) {
    run_released("linear_thin", linear_thin_op(x_obj, w_obj, b_obj, out_obj, relu, out_low_obj));
}

// dW = d^T a: d (B, N), a (B, K), dw (N, K).
Op weight_grad_thin_op(py::handle d_obj, py::handle a_obj, py::handle dw_obj) {
    FloatView d = float_view(d_obj, "d", false), a = float_view(a_obj, "a", false);
    FloatView dw = float_view(dw_obj, "dw", true);
    const py::ssize_t B = d.rows, N = d.cols, K = a.cols;
    expect_shape(a, B, K, "a");
    expect_shape(dw, N, K, "dw");
    return [d, a, dw, B, N, K] {
        if (K >= N) {  // dw row n += d[i, n] * a row i
            outer_sums(d.data, a.data, dw.data, B, N, K);
        } else {  // accumulate dw^T (K, N) along the long side N, then transpose
            std::vector<float> t(static_cast<size_t>(K * N));
            outer_sums(a.data, d.data, t.data(), B, K, N);
            for (py::ssize_t n = 0; n < N; ++n)
                for (py::ssize_t k = 0; k < K; ++k) dw.data[n * K + k] = t[k * N + n];
        }
    };
}
void weight_grad_thin(py::handle d_obj, py::handle a_obj, py::handle dw_obj) {
    run_released("weight_grad_thin", weight_grad_thin_op(d_obj, a_obj, dw_obj));
}

// out = (d W) * (a > 0), the gradient at a ReLU layer's output a: d (B, N), W (N, K), a and out (B, K);
// a None: out = d W, the gradient at the network's input (no mask). out_low: out narrowed to bfloat16 as well
// (the layer below's GEMM operand in a bfloat16 step), or None.
Op input_grad_thin_op(py::handle d_obj, py::handle w_obj, py::handle a_obj, py::handle out_obj,
                       py::handle out_low_obj) {
    FloatView d = float_view(d_obj, "d", false), w = float_view(w_obj, "w", false);
    FloatView out = float_view(out_obj, "out", true);
    const py::ssize_t B = d.rows, N = d.cols, K = w.cols;
    expect_shape(w, N, K, "w");
    expect_shape(out, B, K, "out");
    const float* mask = nullptr;
    if (!a_obj.is_none()) {
        FloatView a = float_view(a_obj, "a", false);
        expect_shape(a, B, K, "a");
        mask = a.data;
    }
    Bf16View low = bf16_view(out_low_obj, "out_low", true);
    expect_shape(low, B, K, "out_low");
    return [d, w, mask, out, low, B, N, K] {
        if (N > K) {  // many outputs, few inputs (an input layer): one dot product per input, along N
            const std::vector<float> wt = transposed(w);
            thin_dots(d.data, wt.data(), nullptr, out.data, B, N, K, false);
            if (mask) keep_positive(out.data, mask, B * K, nullptr, nullptr);
        } else {  // few outputs (an output layer): out row = sum over n of d[i, n] (row n of W), masked
            thin_combine_rows(d.data, w.data, mask, out.data, B, N, K);
        }
        if (low.data) narrow(out.data, low.data, B * K);
    };
}
void input_grad_thin(py::handle d_obj, py::handle w_obj, py::handle a_obj, py::handle out_obj,
                     py::handle out_low_obj) {
    run_released("input_grad_thin", input_grad_thin_op(d_obj, w_obj, a_obj, out_obj, out_low_obj));
}

// The MSE to a TD target and its gradient, one critic: q, target (B, 1); weights (B,) importance
// weights or None; scale: the loss's factor (a learner whose critic loss is half the sum of MSEs: 0.5).
// Writes d_q = scale 2 w (q - target) / B (B, 1) and, when abs_td is not None, |q - target| (B,);
// returns the loss, scale times the mean over the batch of w (q - target)^2 (torch's F.mse_loss
// without weights, at scale 1).
// (The loss into *loss when the op runs.)
Op mse_loss_grad_op(py::handle q_obj, py::handle target_obj, py::handle weights_obj, py::handle d_q_obj,
                    py::handle abs_td_obj, double scale, double* loss_out) {
    FloatView q = float_view(q_obj, "q", false), target = float_view(target_obj, "target", false);
    const py::ssize_t B = q.rows;
    expect_shape(q, B, 1, "q");
    expect_shape(target, B, 1, "target");
    const float* w = optional_column(weights_obj, B, "weights", false);
    FloatView d_q = float_view(d_q_obj, "d_q", true);
    expect_shape(d_q, B, 1, "d_q");
    float* abs_td = optional_column(abs_td_obj, B, "abs_td", true);
    const float norm = static_cast<float>(2.0 * scale) / static_cast<float>(B);
    return [q, target, w, d_q, abs_td, norm, scale, loss_out, B] {
        double loss = 0.0;
        for (py::ssize_t i = 0; i < B; ++i) {
            const float td = q.data[i] - target.data[i];
            const float wi = w ? w[i] : 1.0f;
            loss += static_cast<double>(wi * (td * td));
            d_q.data[i] = norm * td * wi;
            if (abs_td) abs_td[i] = std::fabs(td);
        }
        *loss_out = scale * loss / static_cast<double>(B);
    };
}
double mse_loss_grad(py::handle q_obj, py::handle target_obj, py::handle weights_obj, py::handle d_q_obj,
                     py::handle abs_td_obj, double scale) {
    double loss = 0.0;
    // (B, 1): with the GIL
    timed("mse_loss_grad", mse_loss_grad_op(q_obj, target_obj, weights_obj, d_q_obj, abs_td_obj, scale, &loss))();
    return loss;
}

// Runs work() on the calling thread and on up to threads - 1 helpers of the native pool (worker_pool.h),
// each helper with the caller's floating-point control (flush-to-zero and denormals-are-zero, which the
// learner sets per thread) and after on_helper(): work() claims its share (an atomic counter), so a
// helper that wakes late leaves it to the caller and the result does not depend on who ran what.
// Called with the GIL released; work must not throw.
template <typename Work, typename OnHelper>
void run_beside(int threads, const Work& work, const OnHelper& on_helper) {
    if (threads <= 1) {
        work();
        return;
    }
#if defined(__x86_64__) || defined(__i386__)
    const unsigned int csr = _mm_getcsr();
#endif
    pearl_pool::pool().run(threads, [&](int slot) {
        if (slot == 0) {
            work();
            return;
        }
        on_helper();
#if defined(__x86_64__) || defined(__i386__)
        const unsigned int own = _mm_getcsr();
        _mm_setcsr(csr);
        work();
        _mm_setcsr(own);
#else
        work();
#endif
    });
}

// Gradient-norm clip (as torch.nn.utils.clip_grad_norm_, skipped when max_norm <= 0) and one Adam
// step (as torch.optim.Adam, no AMSGrad, L2 weight decay) over lists of parameters, gradients,
// moment buffers and step counters (0-d float32, torch's format; each is incremented first, and they
// must agree). Returns the total gradient norm before clipping.
// (The norm into *norm_out when the op runs.)
Op clip_adam_op(py::list params, py::list grads, py::list exp_avgs, py::list exp_avg_sqs, py::list steps, double lr,
                double beta1, double beta2, double eps, double weight_decay, double max_norm, int threads,
                double* norm_out) {
    const size_t n = params.size();
    if (grads.size() != n || exp_avgs.size() != n || exp_avg_sqs.size() != n || steps.size() != n)
        throw py::value_error("params, grads, exp_avgs, exp_avg_sqs and steps must have the same length");
    std::vector<float*> counters;
    for (size_t k = 0; k < n; ++k) {
        FloatView c = float_view(steps[k], "step", true);
        if (c.rows * c.cols != 1) throw py::value_error("each step counter must hold one value");
        if (k > 0 && *c.data != *counters[0]) throw py::value_error("the step counters of the parameters differ");
        counters.push_back(c.data);
    }
    struct Slot {
        FloatView p, g, m, v;
    };
    std::vector<Slot> slots;
    slots.reserve(n);
    for (size_t k = 0; k < n; ++k) {
        Slot s{float_view(params[k], "param", true), float_view(grads[k], "grad", true),
               float_view(exp_avgs[k], "exp_avg", true), float_view(exp_avg_sqs[k], "exp_avg_sq", true)};
        const py::ssize_t size = s.p.rows * s.p.cols;
        for (const FloatView* o : {&s.g, &s.m, &s.v})
            if (o->rows * o->cols != size)
                throw py::value_error("gradient or moment buffer size differs from its parameter's");
        slots.push_back(s);
    }
    return [counters = std::move(counters), slots = std::move(slots), lr, beta1, beta2, eps, weight_decay, max_norm,
            threads, norm_out] {
        double sq = 0.0;
        for (const Slot& s : slots) sq += dot(s.g.data, s.g.data, s.p.rows * s.p.cols);
        for (float* c : counters) *c += 1.0f;
        const double step = counters.empty() ? 1.0 : *counters[0];
        const double norm = std::sqrt(sq);
        const float clip = max_norm > 0.0 ? static_cast<float>(std::min(max_norm / (norm + 1e-6), 1.0)) : 1.0f;

        const double bias1 = 1.0 - std::pow(beta1, step), bias2 = 1.0 - std::pow(beta2, step);
        const float step_size = static_cast<float>(lr / bias1), bias2_sqrt = static_cast<float>(std::sqrt(bias2));
        const float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2), e = static_cast<float>(eps);
        const float wd = static_cast<float>(weight_decay);
        // the update is element-wise: chunks of it on several threads (run_beside) give the bits of one pass
        constexpr py::ssize_t kChunk = 8192;
        std::vector<std::pair<size_t, py::ssize_t>> chunks;  // (slot, first element)
        for (size_t k = 0; k < slots.size(); ++k)
            for (py::ssize_t at = 0; at < slots[k].p.rows * slots[k].p.cols; at += kChunk) chunks.emplace_back(k, at);
        std::atomic<size_t> next{0};
        run_beside(std::min<int>(threads, static_cast<int>(chunks.size())), [&] {
            for (size_t c; (c = next.fetch_add(1)) < chunks.size();) {
                const Slot& s = slots[chunks[c].first];
                const py::ssize_t at = chunks[c].second, size = std::min(kChunk, s.p.rows * s.p.cols - at);
                adam_update(s.p.data + at, s.g.data + at, s.m.data + at, s.v.data + at, size, clip, wd, b1, b2, e,
                            step_size, bias2_sqrt);
            }
        }, [] {});
        *norm_out = norm;
    };
}
double clip_adam(py::list params, py::list grads, py::list exp_avgs, py::list exp_avg_sqs, py::list steps, double lr,
                 double beta1, double beta2, double eps, double weight_decay, double max_norm, int threads) {
    double norm = 0.0;
    // the arrays stay referenced by the caller's lists
    run_released("clip_adam", clip_adam_op(params, grads, exp_avgs, exp_avg_sqs, steps, lr, beta1, beta2, eps,
                                           weight_decay, max_norm, threads, &norm));
    return norm;
}

// ---- SAC's squashed Gaussian policy (SB3's SquashedDiagGaussianDistribution) --------------------
// The (B, action) element-wise work around the actor's network in one pass each, instead of some twenty
// small torch ops. The forward pass is evaluated in double and rounded once (the float64 reference to
// the bit); the backward pass is float32 arithmetic in the torch step's order (its ops' bits).

constexpr double kLogStdMin = -20.0, kLogStdMax = 2.0, kSquashEps = 1e-6;

// out (B, 2A): the policy network's outputs (means, then raw log sigmas); eps (B, A): standard normal noise.
// Writes action = tanh(mean + sigma eps) and sigma = exp(clamp(raw, -20, 2)) (B, A), and log_prob (B, 1) =
// sum_j (-eps_j^2 / 2 - log sigma_j - log(2 pi) / 2) - sum_j log(1 - a_j^2 + 1e-6) (squash() in float64, rounded).
Op squash_sample_op(py::handle out_obj, py::handle eps_obj, py::handle action_obj, py::handle std_obj,
                    py::handle log_prob_obj) {
    FloatView out = float_view(out_obj, "out", false), eps = float_view(eps_obj, "eps", false);
    const py::ssize_t B = eps.rows, A = eps.cols;
    expect_shape(out, B, 2 * A, "out");
    FloatView action = float_view(action_obj, "action", true), sigma = float_view(std_obj, "std", true);
    FloatView log_prob = float_view(log_prob_obj, "log_prob", true);
    expect_shape(action, B, A, "action");
    expect_shape(sigma, B, A, "std");
    expect_shape(log_prob, B, 1, "log_prob");
    const double half_log_2pi = 0.5 * std::log(2.0 * M_PI);
    return [out, eps, action, sigma, log_prob, half_log_2pi, B, A] {
        for (py::ssize_t i = 0; i < B; ++i) {
            double gaussian = 0.0, squash = 0.0;
            for (py::ssize_t j = 0; j < A; ++j) {
                const double e = eps.data[i * A + j];
                const double log_std = std::min(std::max(static_cast<double>(out.data[i * 2 * A + A + j]), kLogStdMin),
                                                kLogStdMax);
                const double s = std::exp(log_std);
                const double a = std::tanh(static_cast<double>(out.data[i * 2 * A + j]) + s * e);
                gaussian += -0.5 * (e * e) - log_std - half_log_2pi;
                squash += std::log(1.0 - a * a + kSquashEps);
                action.data[i * A + j] = static_cast<float>(a);
                sigma.data[i * A + j] = static_cast<float>(s);
            }
            log_prob.data[i] = static_cast<float>(gaussian - squash);
        }
    };
}
void squash_sample(py::handle out_obj, py::handle eps_obj, py::handle action_obj, py::handle std_obj,
                   py::handle log_prob_obj) {
    run_released("squash_sample", squash_sample_op(out_obj, eps_obj, action_obj, std_obj, log_prob_obj));
}

// The gradient at the policy network's outputs of SAC's actor loss mean(alpha log pi(a|s) - min(Q1, Q2)(s, a))
// at a squash_sample: q1, q2 (B, 1) the critics at (s, a); d1, d2 (B, C) each critic's input gradient at
// dLoss/dQ = -1/B (the action is its last A columns); action, eps, std (B, A) and out (B, 2A) the sample's;
// scale = alpha / B, dLoss/d(log pi) per sample. Writes d_out (B, 2A): the means' and the raw log sigmas'
// (none where the clamp held them). The float32 ops of the torch step, in its order: min's gradient (the
// smaller critic's, half of each on a tie), + 2 scale a / (1 - a^2 + 1e-6) (log pi's tanh term), times
// 1 - a^2 (tanh; rounded once, as torch's vectorized tanh_backward takes it with a fused multiply-add), then
// for log sigma (d eps sigma - scale) times the clamp's 0/1 mask.
Op squash_backward_op(py::handle q1_obj, py::handle q2_obj, py::handle d1_obj, py::handle d2_obj,
                      py::handle action_obj, py::handle eps_obj, py::handle std_obj, py::handle out_obj,
                      double scale, py::handle d_out_obj) {
    FloatView action = float_view(action_obj, "action", false), eps = float_view(eps_obj, "eps", false);
    const py::ssize_t B = action.rows, A = action.cols;
    FloatView q1 = float_view(q1_obj, "q1", false), q2 = float_view(q2_obj, "q2", false);
    expect_shape(q1, B, 1, "q1");
    expect_shape(q2, B, 1, "q2");
    FloatView d1 = float_view(d1_obj, "d1", false), d2 = float_view(d2_obj, "d2", false);
    const py::ssize_t C = d1.cols;
    if (C < A) throw py::value_error("d1 must have at least the action's columns");
    expect_shape(d1, B, C, "d1");
    expect_shape(d2, B, C, "d2");
    FloatView sigma = float_view(std_obj, "std", false), out = float_view(out_obj, "out", false);
    expect_shape(eps, B, A, "eps");
    expect_shape(sigma, B, A, "std");
    expect_shape(out, B, 2 * A, "out");
    FloatView d_out = float_view(d_out_obj, "d_out", true);
    expect_shape(d_out, B, 2 * A, "d_out");
    const float s = static_cast<float>(scale), s2 = static_cast<float>(scale * 2.0);
    const float sq_eps = static_cast<float>(kSquashEps), lo = static_cast<float>(kLogStdMin);
    const float hi = static_cast<float>(kLogStdMax);
    return [q1, q2, d1, d2, action, eps, sigma, out, d_out, s, s2, sq_eps, lo, hi, B, A, C] {
        for (py::ssize_t i = 0; i < B; ++i)
            for (py::ssize_t j = 0; j < A; ++j) {
                const float g1 = d1.data[i * C + C - A + j], g2 = d2.data[i * C + C - A + j];
                float d = q1.data[i] < q2.data[i] ? g1 : q2.data[i] < q1.data[i] ? g2 : 0.5f * (g1 + g2);
                const float a = action.data[i * A + j];
                d += s2 * a / ((1.0f - a * a) + sq_eps);
                const float d_pre = d * std::fma(-a, a, 1.0f);  // tanh' = 1 - a^2 rounded once, as torch's tanh_backward
                const float raw = out.data[i * 2 * A + A + j];
                const float kept = raw >= lo && raw <= hi ? 1.0f : 0.0f;
                d_out.data[i * 2 * A + j] = d_pre;
                d_out.data[i * 2 * A + A + j] = (d_pre * eps.data[i * A + j] * sigma.data[i * A + j] - s) * kept;
            }
    };
}
void squash_backward(py::handle q1_obj, py::handle q2_obj, py::handle d1_obj, py::handle d2_obj, py::handle action_obj,
                     py::handle eps_obj, py::handle std_obj, py::handle out_obj, double scale, py::handle d_out_obj) {
    run_released("squash_backward", squash_backward_op(q1_obj, q2_obj, d1_obj, d2_obj, action_obj, eps_obj, std_obj,
                                                       out_obj, scale, d_out_obj));
}

// ---- GEMMs beside the caller ---------------------------------------------------------------------
// A step's independent GEMMs (DQN's online and target forward pass of a wide layer, TD3's twin critics';
// a layer's weight and input gradients) run two at a time: one on the calling thread, one on the native
// pool's helper.
// Handing work to a Python thread costs a futex wake and a GIL hand-over per torch op on a virtualized
// host, as much as a 64x256x256 GEMM; the pool's helper spins between calls and needs no GIL. The
// GEMM is the BLAS routine torch's own torch.mm calls (Fortran sgemm_, passed in by set_blas from
// torch's library), so a task gives the bits torch.addmm / torch.mm give at the same thread count.

using SgemmFn = void (*)(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                         const int*, const float*, const int*, const float*, float*, const int*);
using SetThreadsLocalFn = int (*)(int);
SgemmFn blas_sgemm = nullptr;
SetThreadsLocalFn blas_set_threads_local = nullptr;  // MKL's per-thread count (mkl_set_num_threads_local)

void set_blas(std::uintptr_t sgemm, std::uintptr_t set_threads_local) {
    if (sgemm == 0 || set_threads_local == 0) throw py::value_error("set_blas needs both routines' addresses");
    blas_sgemm = reinterpret_cast<SgemmFn>(sgemm);
    blas_set_threads_local = reinterpret_cast<SetThreadsLocalFn>(set_threads_local);
}

// out (M, N) = op(a) op(b) [+ bias per row] [then ReLU] [then *= (mask > 0)], row-major float32:
// op(a) is a (M, K), or a^T with a stored (K, M) when trans_a; op(b) is b (K, N), or b^T with b stored
// (N, K) when trans_b (a Linear's weight).
struct GemmTask {
    const float* a;
    const float* b;
    float* out;
    int m, n, k;
    bool trans_a, trans_b;
    const float* bias;  // (N,) or nullptr
    bool relu;
    const float* mask;  // (M, N) or nullptr: out *= (mask > 0), a ReLU's backward pass
};

GemmTask gemm_task(const py::handle& spec) {
    auto t = spec.cast<py::tuple>();
    if (t.size() != 8)
        throw py::value_error("a GEMM task is (a, trans_a, b, trans_b, out, bias, relu, mask)");
    FloatView a = float_view(t[0], "a", false), b = float_view(t[2], "b", false);
    FloatView out = float_view(t[4], "out", true);
    const bool trans_a = t[1].cast<bool>(), trans_b = t[3].cast<bool>();
    const py::ssize_t M = trans_a ? a.cols : a.rows, K = trans_a ? a.rows : a.cols;
    const py::ssize_t N = trans_b ? b.rows : b.cols;
    if ((trans_b ? b.cols : b.rows) != K)
        throw py::value_error("GEMM task: a and b do not chain (inner sizes " + std::to_string(K) + " and " +
                              std::to_string(trans_b ? b.cols : b.rows) + ")");
    expect_shape(out, M, N, "out");
    GemmTask task{a.data, b.data, out.data, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K),
                  trans_a, trans_b, nullptr, t[6].cast<bool>(), nullptr};
    if (!t[5].is_none()) {
        FloatView bias = float_view(t[5], "bias", false);
        expect_shape(bias, N, 1, "bias");
        task.bias = bias.data;
    }
    if (!t[7].is_none()) {
        FloatView mask = float_view(t[7], "mask", false);
        expect_shape(mask, M, N, "mask");
        task.mask = mask.data;
    }
    return task;
}

void run_gemm(const GemmTask& t) {
    // row-major out = op(a) op(b) is column-major out^T = op(b)^T op(a)^T; a row-major array is its own
    // transpose in column-major, so the flags carry over unswapped
    if (t.m == 0 || t.n == 0) return;
    const int lda = std::max(1, t.trans_a ? t.m : t.k), ldb = std::max(1, t.trans_b ? t.k : t.n), ldc = t.n;
    const float one = 1.0f, beta = t.bias ? 1.0f : 0.0f;
    if (t.bias)  // as torch.addmm: the bias copied into every row, then accumulated into (beta 1)
        for (int i = 0; i < t.m; ++i) std::copy(t.bias, t.bias + t.n, t.out + static_cast<py::ssize_t>(i) * t.n);
    blas_sgemm(t.trans_b ? "T" : "N", t.trans_a ? "T" : "N", &t.n, &t.m, &t.k, &one, t.b, &ldb, t.a, &lda, &beta,
               t.out, &ldc);
    const py::ssize_t size = static_cast<py::ssize_t>(t.m) * t.n;
    if (t.relu) keep_positive(t.out, t.out, size, nullptr, nullptr);
    if (t.mask) keep_positive(t.out, t.mask, size, nullptr, nullptr);
}

// Runs `tasks` (GemmTask tuples, independent of each other) on up to `threads` threads: the caller's and
// the pool's helper, each claiming the next task; a helper that wakes late leaves its share to the
// caller. The helper runs the BLAS at `blas_threads` threads and with the caller's floating-point
// control (flush-to-zero), so a task's bits do not depend on which thread ran it. Returns the number
// of tasks the helper ran.
int gemms(py::list specs, int threads, int blas_threads) {
    if (blas_sgemm == nullptr) throw std::runtime_error("gemms: no BLAS routine set (call set_blas first)");
    std::vector<GemmTask> tasks;
    tasks.reserve(specs.size());
    for (const auto& spec : specs) tasks.push_back(gemm_task(spec));
    py::gil_scoped_release release;
    std::atomic<size_t> next{0};
    const int n = static_cast<int>(std::min<size_t>(tasks.size(), static_cast<size_t>(std::max(threads, 1))));
    std::atomic<int> by_caller{0};
    const auto caller = std::this_thread::get_id();
    run_beside(n, [&] {
        for (size_t i; (i = next.fetch_add(1)) < tasks.size();) {
            run_gemm(tasks[i]);
            if (std::this_thread::get_id() == caller) by_caller.fetch_add(1);
        }
    }, [&] {
        static thread_local int helper_threads = 0;  // MKL's count is per thread: set when it changes
        if (helper_threads != blas_threads) {
            blas_set_threads_local(blas_threads);
            helper_threads = blas_threads;
        }
    });
    return static_cast<int>(tasks.size()) - by_caller.load();  // the tasks the helpers ran
}

// ---- programs: a step's pieces as one call ---------------------------------------------------------
// A Python thread that calls torch and this module op by op gives up the GIL at each call and waits to take
// it back, while the learner's other thread does the same: on a virtualized host each hand-over costs as
// much as a small op. A Program records the pieces of a part of a step (its arguments checked and bound
// at once, the arrays held), and run() does them in order with the GIL released once. Its GEMMs are torch's
// own (at::mm_out through the address set_mm takes, from pearl_fpga._aten_gemm), in float32 or bfloat16,
// so a program computes the bits of the same pieces called one by one.

// out (M, N) = op(a) op(b) [+ bias (N,) per row, or nullptr] in float32 (bf16 = 0) or bfloat16 (1), row-major
// with leading dimensions lda, ldb, ldo; op(a) is a (M, K), or a^T stored (K, M) when trans_a. Returns 0, or
// nonzero on failure.
using MmFn = int (*)(int, std::int64_t, std::int64_t, std::int64_t, const void*, std::int64_t, int, const void*,
                     std::int64_t, int, const void*, void*, std::int64_t);
MmFn torch_mm = nullptr;

void set_mm(std::uintptr_t address) {
    if (address == 0) throw py::value_error("set_mm needs the routine's address");
    torch_mm = reinterpret_cast<MmFn>(address);
}

// A GEMM operand: float32, or bfloat16 bits (16-bit integers), C-contiguous and 2-D.
struct MatrixView {
    void* data;
    py::ssize_t rows, cols;
    bool bf16;
};

MatrixView matrix_view(const py::handle& obj, const char* name, bool writable) {
    if (py::isinstance<py::array_t<float>>(obj)) {
        FloatView v = float_view(obj, name, writable);
        if (py::reinterpret_borrow<py::array>(obj).ndim() != 2) throw py::value_error(std::string(name) + " must be 2-D");
        return {v.data, v.rows, v.cols, false};
    }
    if (obj.is_none()) throw py::type_error(std::string(name) + " must be an array, not None");
    Bf16View v = bf16_view(obj, name, writable);
    return {v.data, v.rows, v.cols, true};
}

// out = op(a) op(b) [+ bias, a (1, N) or (N, 1) array, as torch.addmm]: the failure flag set (not thrown: a
// program's ops run beside each other) when torch fails.
Op gemm_op(py::handle a_obj, bool trans_a, py::handle b_obj, bool trans_b, py::handle out_obj, py::handle bias_obj,
           std::atomic<bool>* failed) {
    if (torch_mm == nullptr) throw std::runtime_error("gemm: no GEMM routine set (call set_mm first)");
    MatrixView a = matrix_view(a_obj, "a", false), b = matrix_view(b_obj, "b", false);
    MatrixView out = matrix_view(out_obj, "out", true);
    if (a.bf16 != b.bf16 || a.bf16 != out.bf16)
        throw py::type_error("gemm: a, b and out must all be float32 or all bfloat16 bits");
    const py::ssize_t M = trans_a ? a.cols : a.rows, K = trans_a ? a.rows : a.cols;
    const py::ssize_t N = trans_b ? b.rows : b.cols;
    if ((trans_b ? b.cols : b.rows) != K)
        throw py::value_error("gemm: a and b do not chain (inner sizes " + std::to_string(K) + " and " +
                              std::to_string(trans_b ? b.cols : b.rows) + ")");
    if (out.rows != M || out.cols != N)
        throw py::value_error("gemm: out has shape (" + std::to_string(out.rows) + ", " + std::to_string(out.cols) +
                              "), expected (" + std::to_string(M) + ", " + std::to_string(N) + ")");
    const void* bias = nullptr;
    if (!bias_obj.is_none()) {
        MatrixView v = matrix_view(bias_obj, "bias", false);
        if (v.bf16 != out.bf16) throw py::type_error("gemm: bias must have out's type");
        if (v.rows * v.cols != N || (v.rows != 1 && v.cols != 1))
            throw py::value_error("gemm: bias must hold out's " + std::to_string(N) + " columns, in one row or column");
        bias = v.data;
    }
    return [a, b, out, trans_a, trans_b, M, N, K, bias, failed] {
        if (torch_mm(a.bf16 ? 1 : 0, M, N, K, a.data, a.cols, trans_a, b.data, b.cols, trans_b, bias, out.data, N) != 0)
            failed->store(true);
    };
}

class Program {
   public:
    Program() : results_(std::make_shared<std::deque<double>>()), failed_(std::make_shared<std::atomic<bool>>(false)) {}

    // The module's pieces, recorded (the same arguments).
    void bias_grad(py::handle d, py::handle db) { add("bias_grad", bias_grad_op(d, db), {d, db}); }
    void bias_relu(py::handle out, py::handle b, bool relu, py::handle src, py::handle low) {
        add("bias_relu", bias_relu_op(out, b, relu, src, low), {out, b, src, low});
    }
    void relu_backward(py::handle d, py::handle a, py::handle src, py::handle low) {
        add("relu_backward", relu_backward_op(d, a, src, low), {d, a, src, low});
    }
    void linear_thin(py::handle x, py::handle w, py::handle b, py::handle out, bool relu, py::handle low) {
        add("linear_thin", linear_thin_op(x, w, b, out, relu, low), {x, w, b, out, low});
    }
    void weight_grad_thin(py::handle d, py::handle a, py::handle dw) {
        add("weight_grad_thin", weight_grad_thin_op(d, a, dw), {d, a, dw});
    }
    void input_grad_thin(py::handle d, py::handle w, py::handle a, py::handle out, py::handle low) {
        add("input_grad_thin", input_grad_thin_op(d, w, a, out, low), {d, w, a, out, low});
    }
    void squash_sample(py::handle out, py::handle eps, py::handle action, py::handle sigma, py::handle log_prob) {
        add("squash_sample", squash_sample_op(out, eps, action, sigma, log_prob), {out, eps, action, sigma, log_prob});
    }
    void squash_backward(py::handle q1, py::handle q2, py::handle d1, py::handle d2, py::handle action, py::handle eps,
                         py::handle sigma, py::handle out, double scale, py::handle d_out) {
        add("squash_backward", squash_backward_op(q1, q2, d1, d2, action, eps, sigma, out, scale, d_out),
            {q1, q2, d1, d2, action, eps, sigma, out, d_out});
    }
    // These return the index of their value in run()'s list.
    size_t dqn_loss_grad(py::handle q, py::handle q_next_online, py::handle q_next_target,
                         py::array_t<int64_t, py::array::c_style> action, py::handle reward, py::handle done,
                         py::handle weights, double gamma, bool double_q, py::handle d_q, py::handle abs_td) {
        double* slot = &results_->emplace_back(0.0);
        add("dqn_loss_grad", dqn_loss_grad_op(q, q_next_online, q_next_target, action, reward, done, weights, gamma,
                                              double_q, d_q, abs_td, slot),
            {q, q_next_online, q_next_target, action, reward, done, weights, d_q, abs_td});
        return results_->size() - 1;
    }
    size_t mse_loss_grad(py::handle q, py::handle target, py::handle weights, py::handle d_q, py::handle abs_td,
                         double scale) {
        double* slot = &results_->emplace_back(0.0);
        add("mse_loss_grad", mse_loss_grad_op(q, target, weights, d_q, abs_td, scale, slot),
            {q, target, weights, d_q, abs_td});
        return results_->size() - 1;
    }
    size_t clip_adam(py::list params, py::list grads, py::list exp_avgs, py::list exp_avg_sqs, py::list steps,
                     double lr, double beta1, double beta2, double eps, double weight_decay, double max_norm,
                     int threads) {
        double* slot = &results_->emplace_back(0.0);
        add("clip_adam", clip_adam_op(params, grads, exp_avgs, exp_avg_sqs, steps, lr, beta1, beta2, eps, weight_decay,
                                      max_norm, threads, slot),
            {params, grads, exp_avgs, exp_avg_sqs, steps});
        return results_->size() - 1;
    }
    // Programs' own pieces.
    void gemm(py::handle a, bool trans_a, py::handle b, bool trans_b, py::handle out, py::handle bias) {
        add("gemm", gemm_op(a, trans_a, b, trans_b, out, bias, failed_.get()), {a, b, out, bias});
    }
    // x = torch.relu(x) in place, float32: 0 below 0 (-0 and NaN kept, as torch's).
    void relu(py::handle x_obj) {
        FloatView x = float_view(x_obj, "x", true);
        add("relu", [x] {
            for (py::ssize_t k = 0; k < x.rows * x.cols; ++k) x.data[k] = x.data[k] < 0.0f ? 0.0f : x.data[k];
        }, {x_obj});
    }
    void narrow(py::handle src, py::handle low) { add("narrow", narrow_op(src, low), {src, low}); }
    void widen(py::handle low, py::handle out) { add("widen", widen_op(low, out), {low, out}); }
    // out = [a, b] side by side (torch.cat along dim 1): float32 (B, n_a + n_b), a (B, n_a), b (B, n_b).
    void concat(py::handle out_obj, py::handle a_obj, py::handle b_obj) {
        FloatView out = float_view(out_obj, "out", true), a = float_view(a_obj, "a", false);
        FloatView b = float_view(b_obj, "b", false);
        expect_shape(a, out.rows, a.cols, "a");
        expect_shape(b, out.rows, out.cols - a.cols, "b");
        add("concat", [out, a, b] {
            for (py::ssize_t i = 0; i < out.rows; ++i) {
                std::copy(a.data + i * a.cols, a.data + (i + 1) * a.cols, out.data + i * out.cols);
                std::copy(b.data + i * b.cols, b.data + (i + 1) * b.cols, out.data + i * out.cols + a.cols);
            }
        }, {out_obj, a_obj, b_obj});
    }

    // A program that runs beside this one, from here to join(): with two threads in run(), its ops on the
    // native pool's helper while this program's ops recorded meanwhile run on the caller (either may run
    // both: the two parts must not touch each other's outputs).
    Program& beside() {
        if (side_) throw std::logic_error("Program.beside: the last beside program is not joined yet");
        side_ = std::unique_ptr<Program>(new Program(results_, failed_));
        fork_at_ = ops_.size();
        return *side_;
    }
    void join() {
        if (!side_) throw std::logic_error("Program.join: no beside program to join");
        if (side_->side_) throw std::logic_error("Program.join: the beside program's own beside program is not joined");
        auto here = std::make_shared<std::vector<Op>>(ops_.begin() + static_cast<std::ptrdiff_t>(fork_at_), ops_.end());
        auto there = std::make_shared<std::vector<Op>>(std::move(side_->ops_));
        ops_.resize(fork_at_);
        for (auto& obj : side_->keep_) keep_.push_back(std::move(obj));
        side_->keep_.clear();
        side_->is_joined_ = true;  // kept: Python may still hold it, and recording into it is then an error
        joined_.push_back(std::move(side_));
        const int* threads = &threads_;
        ops_.push_back([here, there, threads] {
            const std::vector<Op>* parts[2] = {here.get(), there.get()};
            std::atomic<int> next{0};
            run_beside(*threads, [&] {
                for (int k; (k = next.fetch_add(1)) < 2;)
                    for (const Op& op : *parts[k]) op();
            }, [] {});
        });
    }

    // Runs the ops recorded since the last run, in order, the GIL released (beside programs on up to `threads`
    // threads), and forgets them; returns the values of every mse_loss_grad and clip_adam recorded so far, by
    // the indices they returned.
    py::list run(int threads) {
        if (side_) throw std::logic_error("Program.run: a beside program is not joined");
        threads_ = std::max(threads, 1);
        failed_->store(false);
        {
            py::gil_scoped_release release;
            for (const Op& op : ops_) op();
        }
        ops_.clear();
        keep_.clear();
        if (failed_->load()) throw std::runtime_error("Program.run: a torch GEMM failed (see torch's message above)");
        py::list values;
        for (double v : *results_) values.append(v);
        return values;
    }

   private:
    Program(std::shared_ptr<std::deque<double>> results, std::shared_ptr<std::atomic<bool>> failed)
        : results_(std::move(results)), failed_(std::move(failed)) {}

    // Records `op`, the piece `name` (timed when piece timing is on).
    void add(const char* name, Op op, std::initializer_list<py::handle> args) {
        if (is_joined_) throw std::logic_error("Program: this beside program is joined; record into the one it joined");
        for (const py::handle& h : args) keep_.push_back(py::reinterpret_borrow<py::object>(h));
        ops_.push_back(timed(name, std::move(op)));
    }

    std::vector<Op> ops_;
    std::vector<py::object> keep_;  // what the ops read and write, alive as long as the program
    std::shared_ptr<std::deque<double>> results_;  // a deque: its values stay where the ops point
    std::shared_ptr<std::atomic<bool>> failed_;
    std::unique_ptr<Program> side_;
    std::vector<std::unique_ptr<Program>> joined_;  // the beside programs joined so far (their ops moved out)
    bool is_joined_ = false;  // this is a beside program, joined
    size_t fork_at_ = 0;
    int threads_ = 1;
};

}  // namespace

PYBIND11_MODULE(_learner_native, m) {
    m.doc() = "Fused element-wise pieces of a CPU learner step (TD losses, bias gradients, ReLU masks, thin layers, "
              "SAC's squashed Gaussian, clip + Adam)";
    // an unknown PEARL_FPGA_NATIVE_ISA fails the import, naming the variable
    static const pearl_isa::Isa isa = pearl_isa::best();
    for (auto select : {dot_select, adam_update_select, column_sums_select, add_bias_relu_select, keep_positive_select,
                        narrow_select, thin_wide_rows_select, thin_dots_select, thin_combine_rows_select,
                        outer_sums_select})
        select(isa);
    m.def("isa", [] { return std::string(pearl_isa::name(isa)); },
          "The hot loops' path: 'avx512', 'avx2' or 'scalar' (the CPU's at import, capped by PEARL_FPGA_NATIVE_ISA).");
    m.def("dqn_loss_grad", &dqn_loss_grad, py::arg("q"), py::arg("q_next_online"), py::arg("q_next_target"),
          py::arg("action"), py::arg("reward"), py::arg("done"), py::arg("weights"), py::arg("gamma"),
          py::arg("double_q"), py::arg("d_q"), py::arg("abs_td"));
    m.def("bias_grad", &bias_grad, py::arg("d"), py::arg("db"));
    m.def("linear_thin", &linear_thin, py::arg("x"), py::arg("w"), py::arg("b"), py::arg("out"), py::arg("relu"),
          py::arg("out_low") = py::none());
    m.def("weight_grad_thin", &weight_grad_thin, py::arg("d"), py::arg("a"), py::arg("dw"));
    m.def("input_grad_thin", &input_grad_thin, py::arg("d"), py::arg("w"), py::arg("a"), py::arg("out"),
          py::arg("out_low") = py::none());
    m.def("relu_backward", &relu_backward, py::arg("d"), py::arg("a"), py::arg("src") = py::none(),
          py::arg("out_low") = py::none());
    m.def("bias_relu", &bias_relu, py::arg("out"), py::arg("b"), py::arg("relu"), py::arg("src") = py::none(),
          py::arg("out_low") = py::none());
    m.def("mse_loss_grad", &mse_loss_grad, py::arg("q"), py::arg("target"), py::arg("weights"), py::arg("d_q"),
          py::arg("abs_td"), py::arg("scale") = 1.0);
    m.def("squash_sample", &squash_sample, py::arg("out"), py::arg("eps"), py::arg("action"), py::arg("std"),
          py::arg("log_prob"));
    m.def("squash_backward", &squash_backward, py::arg("q1"), py::arg("q2"), py::arg("d1"), py::arg("d2"),
          py::arg("action"), py::arg("eps"), py::arg("std"), py::arg("out"), py::arg("scale"), py::arg("d_out"));
    m.def("clip_adam", &clip_adam, py::arg("params"), py::arg("grads"), py::arg("exp_avgs"), py::arg("exp_avg_sqs"),
          py::arg("step"), py::arg("lr"), py::arg("beta1"), py::arg("beta2"), py::arg("eps"),
          py::arg("weight_decay"), py::arg("max_norm"), py::arg("threads") = 1);
    m.def("set_blas", &set_blas, py::arg("sgemm"), py::arg("set_threads_local"),
          "The addresses of the BLAS's Fortran sgemm_ and MKL's mkl_set_num_threads_local that gemms calls.");
    m.def("gemms", &gemms, py::arg("tasks"), py::arg("threads"), py::arg("blas_threads"),
          "Run independent GEMM tasks (a, trans_a, b, trans_b, out, bias, relu, mask) on the caller and up to "
          "threads - 1 native helpers, the GIL released; the helpers' BLAS at blas_threads threads. Returns how many "
          "tasks the helpers ran.");
    m.def("time_pieces", &time_pieces, py::arg("on"),
          "Time each piece of the programs recorded from now on (on; GEMMs excepted) or stop; returns the times "
          "summed so far, {piece: (calls, seconds)} over every thread, and forgets them.");
    m.def("set_mm", &set_mm, py::arg("address"),
          "The address of the torch GEMM that programs call (pearl_fpga._aten_gemm.address()).");
    py::class_<Program>(m, "Program",
                        "A part of a learner step recorded piece by piece (the module's functions, plus gemm, "
                        "narrow and widen), then run with the GIL released once.")
        .def(py::init<>())
        .def("bias_grad", &Program::bias_grad, py::arg("d"), py::arg("db"))
        .def("bias_relu", &Program::bias_relu, py::arg("out"), py::arg("b"), py::arg("relu"),
             py::arg("src") = py::none(), py::arg("out_low") = py::none())
        .def("relu_backward", &Program::relu_backward, py::arg("d"), py::arg("a"), py::arg("src") = py::none(),
             py::arg("out_low") = py::none())
        .def("linear_thin", &Program::linear_thin, py::arg("x"), py::arg("w"), py::arg("b"), py::arg("out"),
             py::arg("relu"), py::arg("out_low") = py::none())
        .def("weight_grad_thin", &Program::weight_grad_thin, py::arg("d"), py::arg("a"), py::arg("dw"))
        .def("input_grad_thin", &Program::input_grad_thin, py::arg("d"), py::arg("w"), py::arg("a"), py::arg("out"),
             py::arg("out_low") = py::none())
        .def("squash_sample", &Program::squash_sample, py::arg("out"), py::arg("eps"), py::arg("action"),
             py::arg("std"), py::arg("log_prob"))
        .def("squash_backward", &Program::squash_backward, py::arg("q1"), py::arg("q2"), py::arg("d1"), py::arg("d2"),
             py::arg("action"), py::arg("eps"), py::arg("std"), py::arg("out"), py::arg("scale"), py::arg("d_out"))
        .def("dqn_loss_grad", &Program::dqn_loss_grad, py::arg("q"), py::arg("q_next_online"), py::arg("q_next_target"),
             py::arg("action"), py::arg("reward"), py::arg("done"), py::arg("weights"), py::arg("gamma"),
             py::arg("double_q"), py::arg("d_q"), py::arg("abs_td"))
        .def("mse_loss_grad", &Program::mse_loss_grad, py::arg("q"), py::arg("target"), py::arg("weights"),
             py::arg("d_q"), py::arg("abs_td"), py::arg("scale") = 1.0)
        .def("clip_adam", &Program::clip_adam, py::arg("params"), py::arg("grads"), py::arg("exp_avgs"),
             py::arg("exp_avg_sqs"), py::arg("step"), py::arg("lr"), py::arg("beta1"), py::arg("beta2"),
             py::arg("eps"), py::arg("weight_decay"), py::arg("max_norm"), py::arg("threads") = 1)
        .def("gemm", &Program::gemm, py::arg("a"), py::arg("trans_a"), py::arg("b"), py::arg("trans_b"),
             py::arg("out"), py::arg("bias") = py::none(),
             "out = op(a) op(b) [+ bias per row: torch.addmm] by torch's GEMM: float32, or bfloat16 bits (16-bit "
             "integer arrays).")
        .def("relu", &Program::relu, py::arg("x"), "x = torch.relu(x) in place (float32).")
        .def("narrow", &Program::narrow, py::arg("src"), py::arg("low"), "low = src narrowed to bfloat16 (its bits).")
        .def("widen", &Program::widen, py::arg("low"), py::arg("out"), "out = low (bfloat16 bits) widened to float32.")
        .def("concat", &Program::concat, py::arg("out"), py::arg("a"), py::arg("b"),
             "out = [a, b] side by side (float32; torch.cat along dim 1).")
        .def("beside", &Program::beside, py::return_value_policy::reference_internal,
             "The program run beside this one's next ops until join().")
        .def("join", &Program::join)
        .def("run", &Program::run, py::arg("threads") = 1);
}
