// isa.h: which instruction set the native paths run, chosen at run time.
//
// Each extension picks the widest path the CPU has (AVX-512, AVX2, scalar); every path computes the
// same bits. PEARL_FPGA_NATIVE_ISA=vnni|avx512|avx2|scalar caps the choice, so that one host can run
// the paths another CPU would take (make test runs the suite's ISA-sensitive tests under each cap).
// "vnni" (the default) also allows the int16 dot-product instructions (AVX512-VNNI with AVX-512,
// AVX-VNNI with AVX2) on top of the widest vectors; "avx512" and below leave them out.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace pearl_isa {

// VNNI is a cap only: best() names the widest vectors, has_vnni() says whether to add the dot products.
enum class Isa { SCALAR = 0, AVX2 = 1, AVX512 = 2, VNNI = 3 };

inline const char* name(Isa isa) {
    return isa == Isa::VNNI ? "vnni" : isa == Isa::AVX512 ? "avx512" : isa == Isa::AVX2 ? "avx2" : "scalar";
}

// The cap from PEARL_FPGA_NATIVE_ISA (unset or empty: no cap); an unknown value is an error.
inline Isa cap() {
    const char* v = std::getenv("PEARL_FPGA_NATIVE_ISA");
    if (v == nullptr || *v == '\0') return Isa::VNNI;
    const std::string s(v);
    if (s == "vnni") return Isa::VNNI;
    if (s == "avx512") return Isa::AVX512;
    if (s == "avx2") return Isa::AVX2;
    if (s == "scalar") return Isa::SCALAR;
    throw std::invalid_argument("PEARL_FPGA_NATIVE_ISA must be vnni, avx512, avx2 or scalar (or unset), not '" + s + "'");
}

// What the CPU supports: AVX-512 means F and BW (the integer MACs need BW), AVX2 means AVX2 with BMI2.
inline bool cpu_has(Isa isa) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (isa == Isa::AVX512) return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    if (isa == Isa::AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2");
#endif
    return isa == Isa::SCALAR;
}

// Whether the CPU has the int16 dot products (vpdpwssd) for vectors of `width` (AVX512 or AVX2).
inline bool cpu_has_vnni(Isa width) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (width == Isa::AVX512) return cpu_has(Isa::AVX512) && __builtin_cpu_supports("avx512vnni");
    if (width == Isa::AVX2) return cpu_has(Isa::AVX2) && __builtin_cpu_supports("avxvnni");
#endif
    (void)width;
    return false;
}

// The widest vectors the CPU has, within the cap (never VNNI: see has_vnni).
inline Isa best() {
    const Isa limit = cap();
    for (Isa isa : {Isa::AVX512, Isa::AVX2}) {
        if (int(isa) <= int(limit) && cpu_has(isa)) return isa;
    }
    return Isa::SCALAR;
}

// Whether the widest vectors (best()) get the int16 dot products: the CPU has them and the cap allows them.
inline bool has_vnni() { return cap() == Isa::VNNI && cpu_has_vnni(best()); }

}  // namespace pearl_isa
