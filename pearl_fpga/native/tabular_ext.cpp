// pybind11 binding of the tabular kernel's C++ (hls/tabular/tabular.cpp) as the "cpu" backend:
// pearl_fpga._tabular_native.update(table, alpha, gamma, sarsa, s, a, r, s2, a2, done) applies a batch
// of transitions in order to a C-contiguous int32 table in place, with the GIL released (so K
// threads can run K partitions). Arrays of the wrong dtype, shape or layout are refused, never copied.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tabular.h"

namespace py = pybind11;

namespace {

template <typename T>
const T* vector_of(const py::array& x, const char* name, py::ssize_t n) {
    if (!py::isinstance<py::array_t<T>>(x) || x.ndim() != 1 || x.shape(0) != n ||
        !(x.flags() & py::array::c_style))
        throw py::type_error(std::string(name) + " must be a 1-D C-contiguous " + py::str(py::dtype::of<T>()).cast<std::string>() +
                             " array of length " + std::to_string(n));
    return static_cast<const T*>(x.data());
}

void update(py::array table, uint32_t alpha, uint32_t gamma, bool sarsa, const py::array& s, const py::array& a,
            const py::array& r, const py::array& s2, const py::array& a2, const py::array& done) {
    if (!py::isinstance<py::array_t<int32_t>>(table) || table.ndim() != 2 || !(table.flags() & py::array::c_style) ||
        !table.writeable())
        throw py::type_error("table must be a writable 2-D C-contiguous int32 array (n_states, n_actions)");
    if (alpha < 1 || alpha > tabular::ONE || gamma > tabular::ONE)
        throw py::value_error("alpha must be a word in 1..65536 and gamma in 0..65536 (16 fractional bits)");
    const py::ssize_t n = s.ndim() == 1 ? s.shape(0) : -1;
    const auto* ps = vector_of<uint32_t>(s, "s", n);
    const auto* pa = vector_of<uint32_t>(a, "a", n);
    const auto* pr = vector_of<int32_t>(r, "r", n);
    const auto* ps2 = vector_of<uint32_t>(s2, "s2", n);
    const auto* pa2 = vector_of<uint32_t>(a2, "a2", n);
    const auto* pd = vector_of<uint8_t>(done, "done", n);
    const auto n_states = uint64_t(table.shape(0));
    const auto n_actions = uint32_t(table.shape(1));
    for (py::ssize_t i = 0; i < n; i++) {  // the host validates; this guards the memory
        if (ps[i] >= n_states || ps2[i] >= n_states || pa[i] >= n_actions || (sarsa && pa2[i] >= n_actions))
            throw py::index_error("state or action index out of range of the table at transition " + std::to_string(i));
    }
    auto* q = static_cast<int32_t*>(table.mutable_data());
    py::gil_scoped_release release;
    tabular::update_batch(q, n_actions, alpha, gamma, sarsa, ps, pa, pr, ps2, pa2, pd, uint32_t(n));
}


// The fast path of TabularQ.update for the arrays users pass (int64 indices, float64 rewards, bool
// done): one pass checks everything and converts the rewards to words (nothing changes if anything is
// wrong: it returns false and the caller's validator raises the precise error), a second applies the
// transitions. a2 may be None (Q-learning).
bool update_checked(py::array table, uint32_t alpha, uint32_t gamma, bool sarsa, const py::array& s,
                    const py::array& a, const py::array& r, const py::array& s2, const py::object& a2_obj,
                    const py::array& done) {
    if (!py::isinstance<py::array_t<int32_t>>(table) || table.ndim() != 2 || !(table.flags() & py::array::c_style) ||
        !table.writeable())
        throw py::type_error("table must be a writable 2-D C-contiguous int32 array (n_states, n_actions)");
    if (alpha < 1 || alpha > tabular::ONE || gamma > tabular::ONE)
        throw py::value_error("alpha must be a word in 1..65536 and gamma in 0..65536 (16 fractional bits)");
    const py::ssize_t n = s.ndim() == 1 ? s.shape(0) : -1;
    const auto* ps = vector_of<int64_t>(s, "s", n);
    const auto* pa = vector_of<int64_t>(a, "a", n);
    const auto* pr = vector_of<double>(r, "r", n);
    const auto* ps2 = vector_of<int64_t>(s2, "s2", n);
    const auto* pd = vector_of<bool>(done, "done", n);
    const int64_t* pa2 = nullptr;
    if (!a2_obj.is_none()) pa2 = vector_of<int64_t>(a2_obj.cast<py::array>(), "a2", n);
    if (sarsa && pa2 == nullptr) return false;
    const auto n_states = int64_t(table.shape(0));
    const auto n_actions = int64_t(table.shape(1));
    auto* q = static_cast<int32_t*>(table.mutable_data());
    std::vector<int32_t> words(n);
    bool ok = true;
    {
        py::gil_scoped_release release;
        // branch-free, so that the compiler vectorizes the check (the update loop is a chain through the table)
        bool good = true;
        for (py::ssize_t i = 0; i < n; i++) {
            const double w = std::floor(pr[i] * 65536.0 + 0.5);  // as spec.tabular.reward_words
            const bool in = (uint64_t(ps[i]) < uint64_t(n_states)) & (uint64_t(ps2[i]) < uint64_t(n_states)) &
                            (uint64_t(pa[i]) < uint64_t(n_actions)) & (w >= double(INT32_MIN)) &
                            (w <= double(INT32_MAX)) & (pa2 == nullptr || uint64_t(pa2[i]) < uint64_t(n_actions));
            good &= in;  // NaN and inf fail the range test
            words[i] = in ? int32_t(w) : 0;
        }
        ok = good;
        if (ok) {
            for (py::ssize_t i = 0; i < n; i++) {
                tabular::update_one(q + ps[i] * n_actions + pa[i], q + ps2[i] * n_actions, uint32_t(n_actions),
                                    sarsa ? uint32_t(pa2[i]) : 0u, words[i], pd[i], alpha, gamma, sarsa);
            }
        }
    }
    return ok;
}

}  // namespace

PYBIND11_MODULE(_tabular_native, m) {
    m.doc() = "The tabular Q-learning/SARSA kernel's C++ (hls/tabular) as the cpu backend";
    m.def("update", &update, py::arg("table"), py::arg("alpha"), py::arg("gamma"), py::arg("sarsa"), py::arg("s"),
          py::arg("a"), py::arg("r"), py::arg("s2"), py::arg("a2"), py::arg("done"),
          "Apply the transitions in order to `table` in place (GIL released).");
    m.def("update_checked", &update_checked, py::arg("table"), py::arg("alpha"), py::arg("gamma"), py::arg("sarsa"),
          py::arg("s"), py::arg("a"), py::arg("r"), py::arg("s2"), py::arg("a2"), py::arg("done"),
          "Check int64/float64/bool arrays and apply them (GIL released); False, changing nothing, on a bad entry.");
    m.attr("FRAC_BITS") = tabular::FRAC_BITS;
}
