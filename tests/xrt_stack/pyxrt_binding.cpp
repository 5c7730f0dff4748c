// A test-only `pyxrt`: the part of XRT's Python surface that pearl_fpga/board/xrt_transport.py uses,
// with the names and signatures of XRT's own bindings (src/python/pybind11/src/pyxrt.cpp), written
// here against Debian's libxrt (2.13) so that the transport runs on the real library in noop mode.
// Built at test time by tests/xrt_stack/conftest.py; never installed.
#include <cstring>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "experimental/xrt_xclbin.h"
#include "xrt/xrt_bo.h"
#include "xrt/xrt_device.h"
#include "xrt/xrt_kernel.h"

namespace py = pybind11;

PYBIND11_MODULE(pyxrt, m) {
    py::enum_<xclBOSyncDirection>(m, "xclBOSyncDirection")
        .value("XCL_BO_SYNC_BO_TO_DEVICE", XCL_BO_SYNC_BO_TO_DEVICE)
        .value("XCL_BO_SYNC_BO_FROM_DEVICE", XCL_BO_SYNC_BO_FROM_DEVICE)
        .value("XCL_BO_SYNC_BO_GMIO_TO_AIE", XCL_BO_SYNC_BO_GMIO_TO_AIE)
        .value("XCL_BO_SYNC_BO_AIE_TO_GMIO", XCL_BO_SYNC_BO_AIE_TO_GMIO);

    // The states pyxrt names (it leaves ERT_CMD_STATE_RUNNING out, so neither do we).
    py::enum_<ert_cmd_state>(m, "ert_cmd_state")
        .value("ERT_CMD_STATE_NEW", ERT_CMD_STATE_NEW)
        .value("ERT_CMD_STATE_QUEUED", ERT_CMD_STATE_QUEUED)
        .value("ERT_CMD_STATE_COMPLETED", ERT_CMD_STATE_COMPLETED)
        .value("ERT_CMD_STATE_ERROR", ERT_CMD_STATE_ERROR)
        .value("ERT_CMD_STATE_ABORT", ERT_CMD_STATE_ABORT)
        .value("ERT_CMD_STATE_SUBMITTED", ERT_CMD_STATE_SUBMITTED)
        .value("ERT_CMD_STATE_TIMEOUT", ERT_CMD_STATE_TIMEOUT)
        .value("ERT_CMD_STATE_NORESPONSE", ERT_CMD_STATE_NORESPONSE)
        .value("ERT_CMD_STATE_SKERROR", ERT_CMD_STATE_SKERROR)
        .value("ERT_CMD_STATE_SKCRASHED", ERT_CMD_STATE_SKCRASHED);

    py::class_<xrt::uuid>(m, "uuid")
        .def(py::init<char*>())
        .def("to_string", &xrt::uuid::to_string);

    py::class_<xrt::xclbin>(m, "xclbin")
        .def(py::init<>())
        .def(py::init([](const std::string& path) { return new xrt::xclbin(path); }))
        .def("get_uuid", &xrt::xclbin::get_uuid)
        .def("get_xsa_name", &xrt::xclbin::get_xsa_name);

    py::class_<xrt::device>(m, "device")
        .def(py::init<>())
        .def(py::init<unsigned int>())
        .def("load_xclbin", [](xrt::device& d, const std::string& path) { return d.load_xclbin(path); })
        .def("load_xclbin", [](xrt::device& d, const xrt::xclbin& x) { return d.load_xclbin(x); })
        .def("get_xclbin_uuid", &xrt::device::get_xclbin_uuid);

    py::class_<xrt::kernel> kernel(m, "kernel");
    py::enum_<xrt::kernel::cu_access_mode>(kernel, "cu_access_mode")
        .value("exclusive", xrt::kernel::cu_access_mode::exclusive)
        .value("shared", xrt::kernel::cu_access_mode::shared)
        .value("none", xrt::kernel::cu_access_mode::none)
        .export_values();
    kernel
        .def(py::init([](const xrt::device& d, const xrt::uuid& u, const std::string& name,
                         xrt::kernel::cu_access_mode mode) { return new xrt::kernel(d, u, name, mode); }))
        .def(py::init([](const xrt::device& d, const xrt::uuid& u, const std::string& name) {
            return new xrt::kernel(d, u, name);
        }))
        .def("group_id", &xrt::kernel::group_id);

    py::class_<xrt::run>(m, "run")
        .def(py::init<>())
        .def(py::init<const xrt::kernel&>())
        .def("start", [](xrt::run& r) { r.start(); })
        .def("set_arg", [](xrt::run& r, int i, xrt::bo& b) { r.set_arg(i, b); })
        .def("set_arg", [](xrt::run& r, int i, int& v) { r.set_arg<int&>(i, v); })
        .def("wait", [](xrt::run& r) { return r.wait(0); })
        .def("wait", [](xrt::run& r, unsigned int timeout_ms) { return r.wait(timeout_ms); })
        .def("state", &xrt::run::state);

    py::class_<xrt::bo> bo(m, "bo");
    py::enum_<xrt::bo::flags>(bo, "flags")
        .value("normal", xrt::bo::flags::normal)
        .value("cacheable", xrt::bo::flags::cacheable)
        .value("device_only", xrt::bo::flags::device_only)
        .value("host_only", xrt::bo::flags::host_only)
        .value("p2p", xrt::bo::flags::p2p)
        .value("svm", xrt::bo::flags::svm)
        .export_values();
    bo.def(py::init<xrt::device, size_t, xrt::bo::flags, xrt::memory_group>())
        .def("write", [](xrt::bo& b, py::buffer data, size_t seek) {
            py::buffer_info info = data.request();
            b.write(info.ptr, info.itemsize * info.size, seek);
        })
        .def("read", [](xrt::bo& b, size_t size, size_t skip) {
            py::array_t<char> out(size);
            b.read(out.request().ptr, size, skip);
            return out;
        })
        .def("sync", [](xrt::bo& b, xclBOSyncDirection dir, size_t size, size_t offset) { b.sync(dir, size, offset); })
        .def("sync", [](xrt::bo& b, xclBOSyncDirection dir) { b.sync(dir); })
        .def("size", &xrt::bo::size)
        .def("address", &xrt::bo::address);
}
