// pearl_fpga._replay_native: the replay kernel's HLS C++ core (hls/replay/replay.cpp) as the "cpu"
// backend. The tree shape is a runtime argument; the sum-tree functions are exactly the ones the
// HLS top calls. Wrong dtype, shape or layout is refused with a TypeError/ValueError instead of being
// converted silently. Calls release the GIL, so the tree's inputs are first copied (another Python
// thread may change the caller's arrays meanwhile: the tree would take a delta for one leaf on the
// path of another); a mutex keeps concurrent calls on one tree (e.g. from a sampling thread) in order.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include <sys/mman.h>

#include "replay.h"

namespace py = pybind11;

namespace {

template <typename T>
const char* dtype_name();
template <>
const char* dtype_name<uint32_t>() { return "uint32"; }
template <>
const char* dtype_name<uint64_t>() { return "uint64"; }
template <>
const char* dtype_name<double>() { return "float64"; }

// A 1-D, C-contiguous array of exactly dtype T, or a clear error naming the fix.
template <typename T>
const T* checked(const py::array& a, const char* name) {
    if (!a.dtype().equal(py::dtype::of<T>())) {
        throw py::type_error(std::string(name) + " must be a numpy array of dtype " + dtype_name<T>() + ", got " +
                             std::string(py::str(a.dtype())) + "; convert it with np.ascontiguousarray(" + name +
                             ", dtype=np." + dtype_name<T>() + ")");
    }
    if (a.ndim() != 1) {
        throw py::value_error(std::string(name) + " must be 1-D, got shape with " + std::to_string(a.ndim()) +
                              " dimensions; pass a flat array");
    }
    if (!(a.flags() & py::array::c_style)) {
        throw py::type_error(std::string(name) + " must be C-contiguous; pass np.ascontiguousarray(" + name + ")");
    }
    return static_cast<const T*>(a.data());
}

// A private copy, taken with the GIL held, of an array the tree reads with the GIL released.
template <typename T>
std::vector<T> copied(const py::array& a, const char* name) {
    const T* p = checked<T>(a, name);
    return std::vector<T>(p, p + a.size());
}

struct AlignedFree {
    void operator()(void* p) const { std::free(p); }
};

// Zeroed storage on 64-byte boundaries, so a node's K children start a cache line. Levels of 2 MiB
// and more go on transparent huge pages where the kernel allows it: random descents then miss the
// TLB far less often.
template <typename T>
std::unique_ptr<T, AlignedFree> zeroed(size_t n) {
    constexpr size_t HUGE_PAGE = size_t(2) << 20;
    const size_t align = n * sizeof(T) >= HUGE_PAGE ? HUGE_PAGE : 64;
    const size_t bytes = (n * sizeof(T) + align - 1) / align * align;
    void* p = std::aligned_alloc(align, bytes);
    if (p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    if (align == HUGE_PAGE) madvise(p, bytes, MADV_HUGEPAGE);  // a hint; failure is harmless
#endif
    std::memset(p, 0, bytes);
    return std::unique_ptr<T, AlignedFree>(static_cast<T*>(p));
}

class SumTree {
   public:
    SumTree(uint32_t capacity, uint32_t fanout) {
        if (!replay::valid_fanout(fanout)) {
            throw py::value_error("fanout must be 2, 4, 8 or 16, got " + std::to_string(fanout));
        }
        if (capacity < 1 || capacity > replay::MAX_CAPACITY) {
            throw py::value_error("capacity must be in 1.." + std::to_string(replay::MAX_CAPACITY) + ", got " +
                                  std::to_string(capacity));
        }
        shape_ = replay::make_shape(capacity, fanout);
        for (uint32_t d = 0; d < shape_.depth; d++) {
            sum_levels_.push_back(zeroed<uint64_t>(shape_.level_size[d]));
            sums_.push_back(sum_levels_.back().get());
        }
        leaves_ = zeroed<uint32_t>(shape_.level_size[shape_.depth]);
    }

    void update(const py::array& indices, const py::array& words) {
        const std::vector<uint32_t> idx_copy = copied<uint32_t>(indices, "indices"),
                                    w_copy = copied<uint32_t>(words, "words");
        const uint32_t *idx = idx_copy.data(), *w = w_copy.data();
        const size_t n = idx_copy.size();
        if (w_copy.size() != n) {
            throw py::value_error("indices and words differ in length (" + std::to_string(n) + " vs " +
                                  std::to_string(w_copy.size()) + ")");
        }
        py::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(mutex_);
        for (size_t b = 0; b < n; b++) {
            if (idx[b] >= shape_.capacity) {
                py::gil_scoped_acquire acquire;
                throw py::value_error("index " + std::to_string(idx[b]) + " is out of range for capacity " +
                                      std::to_string(shape_.capacity) + "; the tree was not changed");
            }
        }
        for (size_t start = 0; start < n; start += replay::MAX_BATCH) {
            const uint32_t m = uint32_t(std::min<size_t>(replay::MAX_BATCH, n - start));
            delta_.resize(m);
            replay::tree_update(shape_, sums_.data(), leaves_.get(), idx + start, w + start, m, delta_.data());
        }
    }

    py::tuple sample(const py::array& targets) {
        const std::vector<uint64_t> t_copy = copied<uint64_t>(targets, "targets");
        const uint64_t* t = t_copy.data();
        const size_t n = t_copy.size();
        py::array_t<int64_t> out_idx(n);
        py::array_t<uint32_t> out_words(n);
        int64_t* oi = out_idx.mutable_data();
        uint32_t* ow = out_words.mutable_data();
        {
            py::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(mutex_);
            const uint64_t total = replay::tree_total(sums_.data());
            for (size_t b = 0; b < n; b++) {
                if (t[b] >= total) {
                    py::gil_scoped_acquire acquire;
                    throw py::value_error("target " + std::to_string(t[b]) + " is not below the total " +
                                          std::to_string(total) + "; draw targets in [0, total)");
                }
            }
            for (size_t start = 0; start < n; start += replay::MAX_BATCH) {
                const uint32_t m = uint32_t(std::min<size_t>(replay::MAX_BATCH, n - start));
                node_.resize(m);
                rem_.resize(m);
                replay::tree_sample(shape_, sums_.data(), leaves_.get(), t + start, m, node_.data(), ow + start,
                                    rem_.data());
                for (uint32_t b = 0; b < m; b++) oi[start + b] = node_[b];
            }
        }
        return py::make_tuple(out_idx, out_words);
    }

    uint64_t total() {
        std::lock_guard<std::mutex> lock(mutex_);
        return replay::tree_total(sums_.data());
    }

    void clear() {
        py::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(mutex_);
        replay::tree_clear(shape_, sums_.data(), leaves_.get());
    }

    py::array_t<uint32_t> leaves() {
        py::array_t<uint32_t> out(shape_.capacity);
        std::lock_guard<std::mutex> lock(mutex_);
        std::memcpy(out.mutable_data(), leaves_.get(), sizeof(uint32_t) * shape_.capacity);
        return out;
    }

    uint32_t capacity() const { return shape_.capacity; }
    uint32_t fanout() const { return shape_.fanout; }
    uint32_t depth() const { return shape_.depth; }

   private:
    replay::TreeShape shape_{};
    std::vector<std::unique_ptr<uint64_t, AlignedFree>> sum_levels_;
    std::vector<uint64_t*> sums_;  // level pointers, as the core functions take them
    std::unique_ptr<uint32_t, AlignedFree> leaves_;
    std::vector<uint64_t> delta_, rem_;  // scratch of the batched calls
    std::vector<uint32_t> node_;
    std::mutex mutex_;
};

// Host-side conversions of hls/replay/SPEC.md in C++, bit-identical to pearl_fpga/spec/replay.py's numpy
// versions (same float64 operations, no FMA contraction: setup.py builds with -ffp-contract=off),
// only faster on small batches. tests/test_replay_sampler.py checks the equality.
// (words uint32, saturated count, position of the first NaN/negative/inf or -1).
py::tuple to_fixed(const py::array& priorities) {
    const double* p = checked<double>(priorities, "priorities");
    const size_t n = size_t(priorities.size());
    py::array_t<uint32_t> words(n);
    uint32_t* w = words.mutable_data();
    int64_t saturated = 0, first_bad = -1;
    for (size_t i = 0; i < n; i++) {
        const double v = p[i];
        if (!(v >= 0) || v == HUGE_VAL) {  // NaN compares false; +inf is not finite
            if (first_bad < 0) first_bad = int64_t(i);
            w[i] = 0;
            continue;
        }
        const double scaled = std::floor(v * 65536.0 + 0.5);
        if (scaled > 4294967295.0) {
            saturated++;
            w[i] = 0xFFFFFFFFu;
        } else {
            w[i] = (v > 0 && scaled < 1) ? 1u : uint32_t(scaled);
        }
    }
    return py::make_tuple(words, saturated, first_bad);
}

// floor((b + u[b]) * (total / B)), at most total - 1, as uint64 (SPEC.md, "Targets").
py::array_t<uint64_t> targets_from_uniform(const py::array& uniform, uint64_t total) {
    const double* u = checked<double>(uniform, "uniform");
    const size_t n = size_t(uniform.size());
    py::array_t<uint64_t> out(n);
    uint64_t* t = out.mutable_data();
    const double segment = double(total) / double(n);
    const double last = double(total - 1);
    for (size_t b = 0; b < n; b++) {
        const double v = std::floor((double(b) + u[b]) * segment);
        t[b] = uint64_t(v < last ? v : last);
    }
    return out;
}

// Integer indices of any width to uint32, checking 0 <= index < limit in the same pass:
// (indices, position of the first out-of-range one or -1).
template <typename T>
int64_t narrow_indices(const T* src, size_t n, uint64_t limit, uint32_t* dst) {
    int64_t first_bad = -1;
    for (size_t i = 0; i < n; i++) {
        const T v = src[i];
        bool bad = uint64_t(v) >= limit;
        if constexpr (std::is_signed_v<T>) bad = bad || v < 0;
        if (bad && first_bad < 0) first_bad = int64_t(i);
        dst[i] = bad ? 0u : uint32_t(v);
    }
    return first_bad;
}

py::tuple indices_to_u32(const py::array& indices, uint64_t limit) {
    if (indices.ndim() != 1 || !(indices.flags() & py::array::c_style)) {
        throw py::type_error("indices must be a 1-D C-contiguous integer array");
    }
    if (indices.dtype().byteorder() == '>') {  // this build runs on little-endian hosts only
        throw py::type_error("indices must be in native byte order; pass indices.astype(np.int64)");
    }
    const size_t n = size_t(indices.size());
    py::array_t<uint32_t> out(n);
    uint32_t* dst = out.mutable_data();
    const void* src = indices.data();
    const char kind = indices.dtype().kind();
    const auto size = indices.itemsize();
    int64_t bad;
    if (kind == 'i' && size == 8) bad = narrow_indices(static_cast<const int64_t*>(src), n, limit, dst);
    else if (kind == 'i' && size == 4) bad = narrow_indices(static_cast<const int32_t*>(src), n, limit, dst);
    else if (kind == 'i' && size == 2) bad = narrow_indices(static_cast<const int16_t*>(src), n, limit, dst);
    else if (kind == 'i' && size == 1) bad = narrow_indices(static_cast<const int8_t*>(src), n, limit, dst);
    else if (kind == 'u' && size == 8) bad = narrow_indices(static_cast<const uint64_t*>(src), n, limit, dst);
    else if (kind == 'u' && size == 4) bad = narrow_indices(static_cast<const uint32_t*>(src), n, limit, dst);
    else if (kind == 'u' && size == 2) bad = narrow_indices(static_cast<const uint16_t*>(src), n, limit, dst);
    else if (kind == 'u' && size == 1) bad = narrow_indices(static_cast<const uint8_t*>(src), n, limit, dst);
    else throw py::type_error("indices must have an integer dtype, got " + std::string(py::str(indices.dtype())));
    return py::make_tuple(out, bad);
}

// Importance weights of prioritized replay normalized by the batch maximum:
// (N P_i)^-beta / max_j (N P_j)^-beta = (min_j w_j / w_i)^beta, as float32 (within 2 float32 ulps
// of the float64 formula).
py::array_t<float> importance_weights(const py::array& words, double beta) {
    const uint32_t* w = checked<uint32_t>(words, "words");
    const size_t n = size_t(words.size());
    py::array_t<float> out(n);
    float* dst = out.mutable_data();
    uint32_t smallest = UINT32_MAX;
    for (size_t i = 0; i < n; i++) smallest = w[i] < smallest ? w[i] : smallest;
    // float pow: the weights are float32 anyway, and powf is about twice as fast as pow here.
    const float b = float(beta);
    for (size_t i = 0; i < n; i++) dst[i] = std::pow(float(double(smallest) / double(w[i])), b);
    return out;
}

}  // namespace

PYBIND11_MODULE(_replay_native, m) {
    m.doc() = "The replay kernel's HLS C++ sum tree (hls/replay/replay.cpp) compiled for the CPU.";
    m.attr("MAX_CAPACITY") = replay::MAX_CAPACITY;
    m.attr("MAX_BATCH") = replay::MAX_BATCH;
    m.def("to_fixed", &to_fixed, py::arg("priorities"),
          "Q16.16 words of float64 priorities: (words, saturated, first_bad) as spec.replay.priorities_to_fixed.");
    m.def("targets_from_uniform", &targets_from_uniform, py::arg("uniform"), py::arg("total"),
          "Stratified targets from rng.random(B) draws, as spec.replay.stratified_targets.");
    m.def("indices_to_u32", &indices_to_u32, py::arg("indices"), py::arg("limit"),
          "Integer indices to uint32 with a range check: (indices, first out-of-range position or -1).");
    m.def("importance_weights", &importance_weights, py::arg("words"), py::arg("beta"),
          "(min(words) / words) ** beta as float32: PER importance weights normalized by the batch max.");
    py::class_<SumTree>(m, "SumTree")
        .def(py::init<uint32_t, uint32_t>(), py::arg("capacity"), py::arg("fanout"))
        .def("update", &SumTree::update, py::arg("indices"), py::arg("words"),
             "Leaf indices[b] := words[b] (uint32 arrays), in order; the last of a repeated index wins.")
        .def("sample", &SumTree::sample, py::arg("targets"),
             "Leaf index (int64) and word (uint32) for each uint64 target in [0, total).")
        .def("total", &SumTree::total, "Root sum (int).")
        .def("clear", &SumTree::clear, "All leaves to 0.")
        .def("leaves", &SumTree::leaves, "Copy of the leaf words (uint32, length capacity).")
        .def_property_readonly("capacity", &SumTree::capacity)
        .def_property_readonly("fanout", &SumTree::fanout)
        .def_property_readonly("depth", &SumTree::depth);
}
