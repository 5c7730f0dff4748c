// ap_axi_sdata.h stand-in for `make csim-vendor`: the AXI4-Stream beat types of Vitis HLS's header of
// this name, with the fields the kernels use (data, keep, strb, last) over the real ap_int types of the
// hls4ml wheel. Written for this project (not a copy of the vendor header, which no open wheel ships);
// Vitis HLS uses its own header, never this one (hls/build.mk does not put tests/ on its include path).
#pragma once

#include <ap_int.h>

template <int D, int U, int TI, int TD>
struct ap_axiu {
    ap_uint<D> data;
    ap_uint<(D + 7) / 8> keep;
    ap_uint<(D + 7) / 8> strb;
    ap_uint<1> last;
};

template <int D, int U, int TI, int TD>
struct ap_axis {
    ap_int<D> data;
    ap_uint<(D + 7) / 8> keep;
    ap_uint<(D + 7) / 8> strb;
    ap_uint<1> last;
};
