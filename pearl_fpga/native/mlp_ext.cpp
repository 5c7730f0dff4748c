// pearl_fpga._mlp_native: the MLP kernel's HLS C++ (hls/mlp/mlp.cpp) as the "cpu" backend.
//
// Engine.load() parses the SPEC.md LOAD stream with the kernel's own load_model(); inference runs
// the kernel's forward_batch() (path "plain") or the bit-identical AVX-512/AVX2 MAC array of
// mlp_simd.h, with or without VNNI, on the same loaded model (path "auto" picks the fastest the CPU
// has). Batches of at least parallel_batch observations are split over threads (worker_pool.h);
// every observation is computed alone, so the bits do not depend on the thread count.
// infer_float() is the fused host path MLPInfer uses: float
// observations -> int16 (SPEC input quantization) -> all layers -> float32, in one call, without
// allocations beyond the result array, releasing the GIL for larger batches.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <sched.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "mlp.h"
#include "mlp_simd.h"
#include "worker_pool.h"

namespace py = pybind11;

namespace {

constexpr int GIL_RELEASE_BATCH = 16;  // below this the release costs more than it frees
// Work per observation is counted in MAC vectors (input pairs x 16-output groups, summed over the
// layers) plus a fixed share for the rest of one observation (input split, requantization, head,
// quantization), fitted to one-thread timings of three networks. A batch is split over threads from
// PARALLEL_WORK on: several times what waking a helper and joining it cost. hls/mlp/README.md says how
// these were measured and how to check them on another host.
constexpr long PARALLEL_WORK = 64 * 1024;
constexpr int OBS_OVERHEAD_WORK = 128;
constexpr int CHUNKS_PER_THREAD = 4;   // a helper that wakes late takes fewer chunks
constexpr int MAX_THREADS = 64;

// Feeds a uint16 word array to load_model() as an AXI stream (tlast on the final word).
struct WordSource {
    const uint16_t* words;
    std::size_t n;
    std::size_t pos;
    pearl::axis16 read() {
        if (pos >= n) return pearl::axis16{0, true};  // unreachable: load_model stops at tlast
        pearl::axis16 w{int16_t(words[pos]), pos + 1 == n};
        ++pos;
        return w;
    }
};

// A loaded network: the kernel's Model and, when a MAC array is on, its repacked copy.
struct Loaded {
    std::unique_ptr<mlp::Model> model;
    std::unique_ptr<mlp_simd::SimdModel> simd;
    mlp_simd::Isa isa = mlp_simd::Isa::PLAIN;
    long work_per_obs = 1;  // in MAC vectors, see PARALLEL_WORK
};

long work_per_observation(const mlp::Model& m) {
    long work = OBS_OVERHEAD_WORK;
    for (int l = 0; l < m.n_layers; ++l) {
        const mlp::LayerDesc& d = m.layer[l];
        work += long((d.n_in + 1) / 2) * ((d.m_out + mlp_simd::VEC - 1) / mlp_simd::VEC);
    }
    return work;
}

// The threads a split batch may use when the caller leaves it open: torch's intra-op thread count
// where torch is loaded (the runtime sets it per process, 1 in actor processes), else the cores this
// process may run on, at most OMP_NUM_THREADS where that is set. Needs the GIL.
int default_threads() {
    py::dict modules = py::module_::import("sys").attr("modules");
    if (modules.contains("torch")) {
        py::object torch = modules["torch"];
        if (py::hasattr(torch, "get_num_threads")) return torch.attr("get_num_threads")().cast<int>();
    }
    int cores = 1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = std::max(1, CPU_COUNT(&set));
    const char* omp = std::getenv("OMP_NUM_THREADS");
    const int omp_threads = omp ? std::atoi(omp) : 0;  // "4,2" (nested levels): the outer count
    return omp_threads > 0 ? std::min(cores, omp_threads) : cores;
}

// Per-thread scratch, reused across calls (no allocation once grown).
struct Scratch {
    std::vector<int16_t> x;
    std::vector<int16_t> y;
    std::vector<int32_t> argmax;
};
thread_local Scratch scratch;

std::string shape_str(const py::array& a) {
    std::string s = "(";
    for (py::ssize_t k = 0; k < a.ndim(); ++k) s += (k ? ", " : "") + std::to_string(a.shape(k));
    return s + (a.ndim() == 1 ? ",)" : ")");
}

class Engine {
   public:
    Engine(const std::string& path, int threads) {
        set_threads(threads);
        if (path == "auto") {
            isa_ = mlp_simd::best_isa();
            return;
        }
        std::string names = "'auto'";
        for (mlp_simd::Isa isa : mlp_simd::ALL_ISAS) {
            names += std::string(", '") + mlp_simd::name(isa) + "'";
            if (path == mlp_simd::name(isa)) {
                if (!mlp_simd::supported(isa)) throw py::value_error("this CPU cannot run the " + path + " path: use path='auto'");
                isa_ = isa;
                return;
            }
        }
        throw py::value_error("path must be one of " + names + ", not '" + path + "'");
    }

    // The MAC array in use: "avx512vnni", "avx512", "avx2vnni", "avx2" or "plain" (the kernel's own HLS loops).
    std::string path() const { return mlp_simd::name(isa_); }

    // Threads for a batch of at least parallel_batch observations; 0: default_threads() at each call.
    int threads() const { return threads_; }
    void set_threads(int threads) {
        if (threads < 0 || threads > MAX_THREADS)
            throw py::value_error("threads must be 0 (automatic) or 1.." + std::to_string(MAX_THREADS) + ", not " +
                                  std::to_string(threads));
        threads_ = threads;
    }

    // The threads a call with `batch` observations would use now (needs the GIL for the default).
    int threads_for(int batch) const { return threads_for(*require_loaded(model_), batch); }

    // The batch size from which a call is split over threads: set (> 0), or from the loaded network's work.
    int parallel_batch() const { return parallel_batch(*require_loaded(model_)); }
    void set_parallel_batch(int batch) {
        if (batch < 0) throw py::value_error("parallel_batch must be 0 (from the network's work) or positive");
        parallel_batch_ = batch;
    }

    // Returns the error register value (0: loaded). On an error the previous weights stay.
    uint32_t load(py::array_t<uint16_t, py::array::c_style | py::array::forcecast> words) {
        if (words.ndim() != 1 || words.size() < 1) throw py::value_error("LOAD stream: expected a non-empty 1-D uint16 array");
        auto loaded = std::make_shared<Loaded>();
        // Default-initialized (2 MB, not zeroed): load_model writes every word a layer uses, padding
        // included, and the model is dropped unless the LOAD succeeds.
        loaded->model = std::unique_ptr<mlp::Model>(new mlp::Model);
        // A private copy: load_model reads it with the GIL released, and another thread may change the
        // caller's array meanwhile.
        const std::vector<uint16_t> stream(words.data(), words.data() + words.size());
        WordSource src{stream.data(), stream.size(), 0};
        uint32_t err;
        {
            py::gil_scoped_release release;
            err = mlp::load_model(src, *loaded->model);
            if (err == 0 && src.pos != src.n) err = mlp::ERR_BAD_LOAD;  // words after tlast: not one LOAD
            if (err == 0 && isa_ != mlp_simd::Isa::PLAIN) loaded->simd = mlp_simd::pack(*loaded->model);
            if (err == 0) loaded->work_per_obs = work_per_observation(*loaded->model);
            loaded->isa = isa_;
        }
        if (err != 0) return err;
        model_ = std::move(loaded);
        return 0;
    }

    // Fixed-point formats of the fused float path: input fa_0, output scale 2^-fa_out.
    void set_io_format(int fa_in, int fa_out) {
        in_scale_ = std::ldexp(1.0, fa_in);
        out_scale_ = std::ldexp(1.0, -fa_out);
    }

    bool loaded() const { return model_ != nullptr; }
    int n_in() const { return require().layer[0].n_in; }
    int n_out() const {
        const mlp::Model& m = require();
        return m.layer[m.n_layers - 1].m_out;
    }
    std::string head() const {
        const mlp::Model& m = require();
        return (m.layer[m.n_layers - 1].flags & mlp::FLAG_TANH) ? "tanh" : "raw";
    }

    // int16 (B, n_0) -> (int16 (B, m), int64 argmax (B,) or None for a tanh head).
    py::tuple infer_int(const py::object& obj) {
        std::shared_ptr<const Loaded> loaded = model_;
        const mlp::Model& m = require(loaded);
        if (!py::array_t<int16_t, py::array::c_style>::check_(obj))
            throw py::type_error("x_q must be a C-contiguous int16 array of shape (batch, n_in)");
        auto x = py::reinterpret_borrow<py::array_t<int16_t, py::array::c_style>>(obj);
        const int n0 = m.layer[0].n_in, mo = m.layer[m.n_layers - 1].m_out;
        const py::ssize_t batch = check_shape(x, n0, /*allow_1d=*/false);
        const bool raw = (m.layer[m.n_layers - 1].flags & mlp::FLAG_RAW) != 0;
        py::array_t<int16_t> y({batch, py::ssize_t(mo)});
        std::vector<int32_t>& am = scratch.argmax;
        am.resize(std::size_t(batch));
        // x is read with the GIL released only for its values (a change meanwhile mixes a batch; no index
        // comes from it), so it is not copied.
        run(*loaded, x.data(), int(batch), y.mutable_data(), am.data());
        if (!raw) return py::make_tuple(y, py::none());
        py::array_t<int64_t> arg(batch);
        int64_t* a = arg.mutable_data();
        for (py::ssize_t b = 0; b < batch; ++b) a[b] = am[std::size_t(b)];
        return py::make_tuple(y, arg);
    }

    // Float observations (n_0,) or (B, n_0) -> float32 outputs (m,) or (B, m): quantize, infer, dequantize.
    py::array infer_float(const py::object& obj) {
        std::shared_ptr<const Loaded> loaded = model_;
        const mlp::Model& m = require(loaded);
        const int mo = m.layer[m.n_layers - 1].m_out;
        py::ssize_t batch;
        bool one_d;
        quantize_obs(*loaded, obj, batch, one_d);
        py::array_t<float> out = one_d ? py::array_t<float>(py::ssize_t(mo)) : py::array_t<float>({batch, py::ssize_t(mo)});
        float* o = out.mutable_data();
        const int16_t* y = scratch.y.data();
        const double scale = out_scale_;
        const py::ssize_t total = batch * mo;
        for (py::ssize_t k = 0; k < total; ++k) o[k] = float(double(y[k]) * scale);
        return std::move(out);
    }

    // RAW head: the greedy action (argmax) per observation; an int for a 1-D observation.
    py::object act_argmax(const py::object& obj) {
        std::shared_ptr<const Loaded> loaded = model_;
        const mlp::Model& m = require(loaded);
        if (!(m.layer[m.n_layers - 1].flags & mlp::FLAG_RAW)) throw py::value_error("act_argmax needs a RAW head");
        py::ssize_t batch;
        bool one_d;
        quantize_obs(*loaded, obj, batch, one_d);
        const int32_t* am = scratch.argmax.data();
        if (one_d) return py::int_(am[0]);
        py::array_t<int64_t> arg(batch);
        int64_t* a = arg.mutable_data();
        for (py::ssize_t b = 0; b < batch; ++b) a[b] = am[b];
        return std::move(arg);
    }

   private:
    mlp_simd::Isa isa_ = mlp_simd::Isa::PLAIN;
    std::shared_ptr<const Loaded> model_;  // replaced whole on load: in-flight calls keep theirs
    double in_scale_ = 1.0;
    double out_scale_ = 1.0;
    int threads_ = 1;
    int parallel_batch_ = 0;

    const mlp::Model& require() const { return require(model_); }
    static const mlp::Model& require(const std::shared_ptr<const Loaded>& m) { return *require_loaded(m)->model; }
    static const Loaded* require_loaded(const std::shared_ptr<const Loaded>& m) {
        if (!m) throw py::value_error("no weights loaded: call load() first");
        return m.get();
    }

    int parallel_batch(const Loaded& l) const {
        if (parallel_batch_ > 0) return parallel_batch_;
        return int(std::max(2L, (PARALLEL_WORK + l.work_per_obs - 1) / l.work_per_obs));
    }

    int threads_for(const Loaded& l, int batch) const {
        if (batch < GIL_RELEASE_BATCH || batch < parallel_batch(l)) return 1;
        return std::max(1, std::min(MAX_THREADS, threads_ > 0 ? threads_ : default_threads()));
    }

    static py::ssize_t check_shape(const py::array& x, int n0, bool allow_1d) {
        if (allow_1d && x.ndim() == 1) {
            if (x.shape(0) != n0)
                throw py::value_error("observation has shape " + shape_str(x) + "; the network takes " +
                                      std::to_string(n0) + " inputs: pass shape (" + std::to_string(n0) +
                                      ",) or (batch, " + std::to_string(n0) + ")");
            return 1;
        }
        if (x.ndim() != 2 || x.shape(1) != n0)
            throw py::value_error("observations have shape " + shape_str(x) + "; the network takes " +
                                  std::to_string(n0) + " inputs: pass shape (batch, " + std::to_string(n0) + ")" +
                                  (allow_1d ? " or (" + std::to_string(n0) + ",)" : ""));
        if (x.shape(0) > mlp::MAX_BATCH)
            throw py::value_error("batch of " + std::to_string(x.shape(0)) + " observations is over MAX_BATCH = " +
                                  std::to_string(mlp::MAX_BATCH) + ": split it into chunks of at most " +
                                  std::to_string(mlp::MAX_BATCH));
        return x.shape(0);
    }

    static void forward(const Loaded& l, const int16_t* x, int batch, int16_t* y, int32_t* argmax) {
        if (l.isa == mlp_simd::Isa::PLAIN)
            mlp::forward_batch(*l.model, x, batch, y, argmax);
        else
            mlp_simd::forward_batch(l.isa, *l.simd, x, batch, y, argmax);
    }

    // Called with the GIL held; releases it for larger batches.
    void run(const Loaded& l, const int16_t* x, int batch, int16_t* y, int32_t* argmax) const {
        if (batch < GIL_RELEASE_BATCH) {
            forward(l, x, batch, y, argmax);
            return;
        }
        const int threads = threads_for(l, batch);
        py::gil_scoped_release release;
        const int n0 = l.model->layer[0].n_in, m = l.model->layer[l.model->n_layers - 1].m_out;
        const int per_chunk = (batch + CHUNKS_PER_THREAD * threads - 1) / (CHUNKS_PER_THREAD * threads);
        // whole blocks of the MAC array's observations
        const int chunk = std::max(1, (per_chunk + mlp_simd::BLOCK_OBS - 1) / mlp_simd::BLOCK_OBS) * mlp_simd::BLOCK_OBS;
        pearl_pool::run_rows(batch, chunk, threads, [&](int begin, int end) {
            forward(l, x + std::size_t(begin) * n0, end - begin, y + std::size_t(begin) * m,
                    argmax ? argmax + begin : nullptr);
        });
    }

    template <typename T>
    void quantize_rows(const T* src, py::ssize_t count, int n0, int16_t* dst) const {
        // SPEC.md input quantization in double: floor(v * 2^fa_0 + 0.5), saturated to int16. The sum is
        // clamped before it is floored (floor is monotonic, so the result is the same) and floored by
        // truncation, branch-free: no call to floor() per value, where the build's baseline ISA has no
        // rounding instruction. Non-finite values are counted here and named below.
        const double scale = in_scale_;
        bool finite = true;
        for (py::ssize_t k = 0; k < count; ++k) {
            const double v = double(src[k]);
            finite &= std::fabs(v) <= DBL_MAX;  // false for NaN and inf
            const double t = v * scale + 0.5;
            const double c = t >= 32767.0 ? 32767.0 : (t >= -32768.0 ? t : -32768.0);  // NaN: -32768, unused
            const int i = int(c);  // towards zero
            dst[k] = int16_t(i - (double(i) > c));
        }
        if (finite) return;
        for (py::ssize_t k = 0; k < count; ++k) {
            const double v = double(src[k]);
            if (!std::isfinite(v))
                throw py::value_error("observation " + std::to_string(k / n0) + ", input " + std::to_string(k % n0) +
                                      " is " + (std::isnan(v) ? "NaN" : "inf") +
                                      ": the kernel takes finite observations only (check the environment or "
                                      "replace non-finite values before calling)");
        }
    }

    // Validates and quantizes observations into scratch.x, then runs the network into scratch.y /
    // scratch.argmax. Raises (state unchanged) on a bad shape, a batch over the limit, NaN or inf.
    void quantize_obs(const Loaded& loaded, const py::object& obj, py::ssize_t& batch, bool& one_d) const {
        const mlp::Model& m = *loaded.model;
        const int n0 = m.layer[0].n_in, mo = m.layer[m.n_layers - 1].m_out;
        py::array arr;
        bool f32 = false;
        if (py::array_t<float, py::array::c_style>::check_(obj)) {
            arr = py::reinterpret_borrow<py::array>(obj);
            f32 = true;
        } else if (py::array_t<double, py::array::c_style>::check_(obj)) {
            arr = py::reinterpret_borrow<py::array>(obj);
        } else {
            arr = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(obj);
            if (!arr) {
                PyErr_Clear();
                throw py::type_error("observations must be a float array (or convertible to one) of shape (batch, " +
                                     std::to_string(n0) + ")");
            }
        }
        batch = check_shape(arr, n0, /*allow_1d=*/true);
        one_d = arr.ndim() == 1;
        const py::ssize_t count = batch * n0;
        scratch.x.resize(std::size_t(count));
        scratch.y.resize(std::size_t(batch * mo));
        scratch.argmax.resize(std::size_t(batch));
        if (f32)
            quantize_rows(static_cast<const float*>(arr.data()), count, n0, scratch.x.data());
        else
            quantize_rows(static_cast<const double*>(arr.data()), count, n0, scratch.x.data());
        run(loaded, scratch.x.data(), int(batch), scratch.y.data(), scratch.argmax.data());
    }
};

// Weight quantization of a sync (SPEC.md rounding): floor(v * 2^frac + 0.5) in double, saturated to
// [lo, hi]; the same IEEE operations as the numpy reference (a product by a power of two, one add,
// floor), so the same integers. Non-finite weights are refused (the caller names the layer).
template <typename Q>
py::array_t<Q> quantize_weights(py::array_t<double, py::array::c_style | py::array::forcecast> x, int frac) {
    const py::ssize_t count = x.size();
    py::array_t<Q> out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
    const double* src = x.data();
    Q* dst = out.mutable_data();
    const double scale = std::ldexp(1.0, frac);
    const double lo = double(std::numeric_limits<Q>::min()), hi = double(std::numeric_limits<Q>::max());
    bool finite = true;
    {
        py::gil_scoped_release release;
        for (py::ssize_t k = 0; k < count; ++k) {
            const double v = src[k];
            finite &= std::fabs(v) <= DBL_MAX;  // false for NaN and inf
            const double q = std::floor(v * scale + 0.5);
            dst[k] = Q(q >= hi ? hi : (q >= lo ? q : lo));  // NaN: lo, refused below
        }
    }
    if (!finite) throw py::value_error("weights hold NaN or inf: the kernel takes finite weights only");
    return out;
}

// The per-unit sums that bound a weight sync's drift (mlp_torch.CalibrationPass.output_bounds), in one
// pass over both weight matrices without temporaries: columns |W'-W| a, |W'| d, |W'| (a+d), |W'-W| (a+d).
using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;
py::array_t<double> drift_sums(DoubleArray w_new, DoubleArray w_old, DoubleArray a, DoubleArray d) {
    if (w_new.ndim() != 2 || w_old.ndim() != 2 || w_new.shape(0) != w_old.shape(0) ||
        w_new.shape(1) != w_old.shape(1) || a.size() != w_new.shape(1) || d.size() != w_new.shape(1))
        throw py::value_error("drift_sums: W' and W must be (m, n) and a, d (n,)");
    const py::ssize_t m = w_new.shape(0), n = w_new.shape(1);
    py::array_t<double> out(std::vector<py::ssize_t>{m, 4});
    const double *wn = w_new.data(), *wo = w_old.data(), *pa = a.data(), *pd = d.data();
    double* o = out.mutable_data();
    {
        py::gil_scoped_release release;
        for (py::ssize_t i = 0; i < m; ++i) {
            double dw_a = 0, w_d = 0, w_ad = 0, dw_ad = 0;
            for (py::ssize_t j = 0; j < n; ++j) {
                const double w = std::fabs(wn[i * n + j]), dw = std::fabs(wn[i * n + j] - wo[i * n + j]);
                const double ad = pa[j] + pd[j];
                dw_a += dw * pa[j];
                w_d += w * pd[j];
                w_ad += w * ad;
                dw_ad += dw * ad;
            }
            o[i * 4] = dw_a, o[i * 4 + 1] = w_d, o[i * 4 + 2] = w_ad, o[i * 4 + 3] = dw_ad;
        }
    }
    return out;
}

}  // namespace

PYBIND11_MODULE(_mlp_native, mod) {
    mod.doc() = "MLP inference kernel (hls/mlp) compiled for the CPU: bit-exact with the hardware (SPEC.md).";
    mlp_simd::best_isa();  // an unknown PEARL_FPGA_NATIVE_ISA fails the import, naming the variable
    mod.attr("PATHS") = [] {
        py::list paths;
        for (mlp_simd::Isa isa : mlp_simd::ALL_ISAS) paths.append(mlp_simd::name(isa));
        return py::tuple(paths);
    }();
    mod.attr("MAX_LAYERS") = mlp::MAX_LAYERS;
    mod.attr("MAX_WIDTH") = mlp::MAX_WIDTH;
    mod.attr("LANES") = mlp::LANES;
    mod.attr("MAX_BATCH") = mlp::MAX_BATCH;
    mod.attr("ERR_BAD_LOAD") = mlp::ERR_BAD_LOAD;
    mod.def(
        "tanh_table",
        []() {
            py::array_t<int16_t> t(mlp::TANH_SEGMENTS + 1);
            const int16_t* src = mlp::tanh_table();
            for (int k = 0; k <= mlp::TANH_SEGMENTS; ++k) t.mutable_data()[k] = src[k];
            return t;
        },
        "The 1025-entry tanh table of SPEC.md as the kernel computes it.");
    mod.def(
        "tanh_pwl",
        [](py::array_t<int16_t, py::array::c_style | py::array::forcecast> y) {
            py::array_t<int16_t> t(y.size());
            for (py::ssize_t k = 0; k < y.size(); ++k) t.mutable_data()[k] = mlp::tanh_pwl(y.data()[k]);
            return t;
        },
        "The kernel's piecewise-linear tanh (Q3.12 -> Q0.15) on a flat int16 array.");
    mod.def("quantize_int16", &quantize_weights<int16_t>, py::arg("x"), py::arg("frac"),
            "floor(x * 2^frac + 0.5) saturated to int16 (SPEC.md weight rounding); ValueError for NaN/inf.");
    mod.def("quantize_int32", &quantize_weights<int32_t>, py::arg("x"), py::arg("frac"),
            "floor(x * 2^frac + 0.5) saturated to int32 (SPEC.md bias rounding); ValueError for NaN/inf.");
    mod.def("drift_sums", &drift_sums, py::arg("w_new"), py::arg("w_old"), py::arg("a"), py::arg("d"),
            "Per unit: |W'-W| a, |W'| d, |W'| (a+d), |W'-W| (a+d) as an (m, 4) float64 array.");
    py::class_<Engine>(mod, "Engine", "One loaded network (the kernel's on-chip weights) and its host formats.")
        .def(py::init<const std::string&, int>(), py::arg("path") = "auto", py::arg("threads") = 1,
             "path: 'auto' (the fastest the CPU has) or one of PATHS ('plain': the kernel's own HLS loops). "
             "threads: for batches of at least parallel_batch observations; 0: torch's intra-op count where "
             "torch is loaded, else the cores this process may use (at most OMP_NUM_THREADS).")
        .def_property_readonly("path", &Engine::path)
        .def_property("threads", &Engine::threads, &Engine::set_threads)
        .def("threads_for", py::overload_cast<int>(&Engine::threads_for, py::const_), py::arg("batch"),
             "The threads a call with `batch` observations would use now.")
        .def_property("parallel_batch", py::overload_cast<>(&Engine::parallel_batch, py::const_),
                      &Engine::set_parallel_batch,
                      "Batch size from which a call is split over threads (set 0: derived from the network's work).")
        .def("load", &Engine::load, py::arg("words"), "Parse a LOAD stream; returns the error register (0 = loaded).")
        .def("set_io_format", &Engine::set_io_format, py::arg("fa_in"), py::arg("fa_out"))
        .def("infer_int", &Engine::infer_int, py::arg("x_q"))
        .def("infer_float", &Engine::infer_float, py::arg("obs"))
        .def("act_argmax", &Engine::act_argmax, py::arg("obs"))
        .def_property_readonly("loaded", &Engine::loaded)
        .def_property_readonly("n_in", &Engine::n_in)
        .def_property_readonly("n_out", &Engine::n_out)
        .def_property_readonly("head", &Engine::head);
}
