"""The policy as ONNX files: the float network (torch.onnx) and the quantized kernel network in QONNX.

QONNX (the ONNX dialect of hls4ml and FINN) marks each quantized tensor with a `Quant` node (scale 2^-f,
zero point 0, 16 bits, signed): the inputs, each layer's weights and each layer's output, ReLU after
it, as the MLP kernel computes (hls/mlp/SPEC.md); each bias is its int32 value times 2^-(fw + fa_in).
The arithmetic between Quant nodes is in double precision (a Cast after each Quant, whose output qonnx
keeps in float32), which holds every accumulator of the kernel exactly (int16 x int16 products summed
over at most 512 inputs, plus the bias), so that executing the graph (qonnx's executor) gives the
kernel's bits. The kernel rounds half up (floor(v + 0.5)): each Quant's input gets half a step added
and rounds with FLOOR (qonnx's HALF_UP rounds half away from zero).
A tanh head's piecewise-linear tanh (1025 table entries, 64-step segments) is written out with standard
ONNX ops (Gather on the table, Floor), the same integers as the kernel's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pearl_fpga.errors import missing_dependency
from pearl_fpga.spec.mlp import HEAD_TANH, TANH_FRAC_BITS, tanh_table

QONNX_DOMAIN = "qonnx.custom_op.general"
ONNX_OPSET = 17
OUTPUT_FRAC_TANH = 15  # a tanh head's output is Q0.15 (SPEC.md)


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as exc:
        raise (missing_dependency(exc, "writing ONNX files") or exc) from None
    return onnx


def write_onnx(module: Any, calibration: np.ndarray, path: Path) -> Path:
    """The float policy `module` (torch nn.Sequential) as ONNX at `path`: input "obs" (batch, n_0) float32,
    output "out" (batch, m), a dynamic batch; checked with onnx.checker."""
    onnx = _onnx()
    try:
        import torch
    except ImportError as exc:
        raise (missing_dependency(exc, "writing the float policy as ONNX") or exc) from None
    module = module.cpu().eval()
    example = torch.as_tensor(np.asarray(calibration[:2], dtype=np.float32))
    path.parent.mkdir(parents=True, exist_ok=True)
    batch = torch.export.Dim("batch", min=1)
    program = torch.onnx.export(module, (example,), input_names=["obs"], output_names=["out"],
                                dynamic_shapes=({0: batch},), dynamo=True, optimize=True, verbose=False)
    if program is None:
        raise RuntimeError("torch.onnx.export returned no program")
    program.save(str(path))
    onnx.checker.check_model(str(path), full_check=True)
    return path


def qonnx_model(kernel: Any, batch: int = 1) -> Any:
    """The QONNX ModelProto of `kernel` (an MLPInfer): input "obs" (batch, n_0) double, output "out"
    (batch, m) double, equal to float64 of kernel(obs) (the dequantized kernel outputs). The batch is
    fixed (qonnx's executor and FINN take static shapes); 1 is one observation per call, as on a board."""
    onnx = _onnx()
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: Any) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float64), name))
        return name

    zero = const("zero", 0.0)
    bits = {16: const("bits16", 16.0)}

    def quant(x: str, frac: int, width: int, name: str, half_up: bool = True) -> str:
        """x (double) rounded half up to multiples of 2^-frac and saturated to `width` signed bits: a Quant
        node, whose output qonnx's executor keeps in float32 (exact for 16 bits), cast back to double for
        the arithmetic after it."""
        if half_up:
            nodes.append(helper.make_node("Add", [x, const(f"{name}_half", 0.5 * 2.0**-frac)], [f"{name}_h"]))
            x = f"{name}_h"
        nodes.append(helper.make_node("Quant", [x, const(f"{name}_scale", 2.0**-frac), zero, bits[width]],
                                      [f"{name}_f"], domain=QONNX_DOMAIN, signed=1, narrow=0, rounding_mode="FLOOR"))
        nodes.append(helper.make_node("Cast", [f"{name}_f"], [name], to=TensorProto.DOUBLE))
        return name

    x = quant("obs", kernel.formats[0].fa_in, 16, "obs_q")
    for i, (layer, fmt) in enumerate(zip(kernel.layers, kernel.formats, strict=True)):
        w = const(f"w{i}", layer.weight.astype(np.float64).T * 2.0**-fmt.fw)
        b = const(f"b{i}", layer.bias.astype(np.float64) * 2.0**-(fmt.fw + fmt.fa_in))
        wq = quant(w, fmt.fw, 16, f"w{i}_q", half_up=False)
        nodes.append(helper.make_node("MatMul", [x, wq], [f"mm{i}"]))
        nodes.append(helper.make_node("Add", [f"mm{i}", b], [f"acc{i}"]))  # int32 bias: exact in double
        x = quant(f"acc{i}", fmt.fa_out, 16, f"a{i}")
        if layer.relu:
            nodes.append(helper.make_node("Relu", [x], [f"relu{i}"]))
            x = f"relu{i}"
    if kernel.head == HEAD_TANH:
        x = _tanh_pwl(x, nodes, const, helper, TensorProto)
    nodes.append(helper.make_node("Identity", [x], ["out"]))
    graph = helper.make_graph(
        nodes, "pearl_fpga_mlp",
        [helper.make_tensor_value_info("obs", TensorProto.DOUBLE, [batch, kernel.n_in])],
        [helper.make_tensor_value_info("out", TensorProto.DOUBLE, [batch, kernel.n_out])],
        initializer=inits)
    model = helper.make_model(graph, producer_name="pearl_fpga",
                              opset_imports=[helper.make_opsetid("", ONNX_OPSET), helper.make_opsetid(QONNX_DOMAIN, 1)])
    model.doc_string = (f"pearl_fpga MLP kernel policy, {kernel.head} head: Quant nodes carry the kernel's fixed-point "
                        "formats; double arithmetic gives its bits")
    onnx.checker.check_model(model)
    return model


def _tanh_pwl(x: str, nodes: list[Any], const: Any, helper: Any, tensor_proto: Any) -> str:
    """SPEC.md's tanh on a Q3.12 value: u = q + 32768, k = u >> 6, r = u & 63,
    out = table[k] + (((table[k+1] - table[k]) * r + 32) >> 6), as Q0.15."""
    table = const("tanh_table", tanh_table().astype(np.float64))
    make = helper.make_node
    nodes += [
        make("Mul", [x, const("t_scale_in", 2.0**TANH_FRAC_BITS)], ["t_q"]),
        make("Add", ["t_q", const("t_offset", 32768.0)], ["t_u"]),
        make("Div", ["t_u", const("t_64", 64.0)], ["t_u64"]),
        make("Floor", ["t_u64"], ["t_k"]),
        make("Mul", ["t_k", "t_64"], ["t_k64"]),
        make("Sub", ["t_u", "t_k64"], ["t_r"]),
        make("Cast", ["t_k"], ["t_ki"], to=tensor_proto.INT64),
        make("Add", ["t_ki", "t_one"], ["t_ki1"]),
        make("Gather", [table, "t_ki"], ["t_y0"]),
        make("Gather", [table, "t_ki1"], ["t_y1"]),
        make("Sub", ["t_y1", "t_y0"], ["t_d"]),
        make("Mul", ["t_d", "t_r"], ["t_dr"]),
        make("Add", ["t_dr", const("t_32", 32.0)], ["t_dr32"]),
        make("Div", ["t_dr32", "t_64"], ["t_step"]),
        make("Floor", ["t_step"], ["t_stepf"]),
        make("Add", ["t_y0", "t_stepf"], ["t_outq"]),
        make("Mul", ["t_outq", const("t_scale_out", 2.0**-OUTPUT_FRAC_TANH)], ["tanh_out"]),
    ]
    nodes.insert(0, make("Constant", [], ["t_one"], value=helper.make_tensor("t_one_v", tensor_proto.INT64, [], [1])))
    return "tanh_out"


def write_qonnx(kernel: Any, path: Path, batch: int = 1) -> Path:
    """`qonnx_model(kernel, batch)` with every tensor's shape annotated (qonnx's InferShapes, which its
    executor and FINN's and hls4ml's readers expect), saved at `path`."""
    model = qonnx_model(kernel, batch)
    try:
        from qonnx.core.modelwrapper import ModelWrapper
        from qonnx.transformation.infer_shapes import InferShapes
    except ImportError as exc:
        raise (missing_dependency(exc, "writing the QONNX policy") or exc) from None
    path.parent.mkdir(parents=True, exist_ok=True)
    ModelWrapper(model).transform(InferShapes()).save(str(path))
    return path
