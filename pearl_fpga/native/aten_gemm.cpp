// aten_gemm.cpp: torch's own GEMM as a C routine (pearl_fpga._aten_gemm), for the learner's programs
// (learner_ext.cpp, Program), which run a step's pieces with the GIL released: at::mm_out on the
// caller's memory is what torch.mm(a, b, out=out) runs (MKL in float32, oneDNN in bfloat16), so a
// program's GEMM gives torch.mm's bits at torch's thread count. Built only where torch's headers are
// (the training install; a board has no torch and no learner).
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/mm.h>
#include <c10/core/InferenceMode.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstdio>
#include <exception>

namespace {

// A row-major (rows, cols) operand with leading dimension ld, or the transpose of one stored (cols, rows).
at::Tensor operand(void* data, std::int64_t rows, std::int64_t cols, std::int64_t ld, bool transposed,
                   at::ScalarType type) {
    const auto options = at::TensorOptions().dtype(type);
    return transposed ? at::from_blob(data, {rows, cols}, {1, ld}, options)
                      : at::from_blob(data, {rows, cols}, {ld, 1}, options);
}

// out (M, N) = op(a) (M, K) op(b) (K, N) [+ bias (N,) per row, as torch.addmm] in float32 (bf16 = 0) or
// bfloat16; 0 on success. Callable from any thread without the GIL; each call takes torch's current intra-op
// thread count, as a torch op does.
extern "C" int pearl_torch_mm(int bf16, std::int64_t M, std::int64_t N, std::int64_t K, const void* a,
                              std::int64_t lda, int trans_a, const void* b, std::int64_t ldb, int trans_b,
                              const void* bias, void* out, std::int64_t ldo) {
    try {
        at::init_num_threads();
        c10::InferenceMode no_autograd;
        const at::ScalarType type = bf16 ? at::kBFloat16 : at::kFloat;
        at::Tensor out_t = operand(out, M, N, ldo, false, type);
        at::Tensor a_t = operand(const_cast<void*>(a), M, K, lda, trans_a != 0, type);
        at::Tensor b_t = operand(const_cast<void*>(b), K, N, ldb, trans_b != 0, type);
        if (bias != nullptr)
            at::addmm_out(out_t, at::from_blob(const_cast<void*>(bias), {N}, at::TensorOptions().dtype(type)), a_t, b_t);
        else
            at::mm_out(out_t, a_t, b_t);
        return 0;
    } catch (const std::exception& e) {
        fprintf(stderr, "pearl_fpga: torch GEMM failed: %s\n", e.what());
        return 1;
    } catch (...) {
        return 1;
    }
}

}  // namespace

PYBIND11_MODULE(_aten_gemm, m) {
    m.doc() = "torch's GEMM (at::mm_out) as a C routine for the learner's native programs";
    m.def("address", [] { return reinterpret_cast<std::uintptr_t>(&pearl_torch_mm); },
          "The address of int pearl_torch_mm(bf16, M, N, K, a, lda, trans_a, b, ldb, trans_b, bias, out, ldo).");
}
