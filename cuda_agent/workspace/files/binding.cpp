// Fixed glue of a cuda-agent workspace (read-only: the build uses the package's copy).
// Creates the Python module `cuda_extension` from every REGISTER_BINDING in kernels/.
#include "binding_registry.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {  // cuda_extension, defined by the build
    m.doc() = "kernels of this workspace, registered in kernels/*_binding.cpp";
    for (auto& entry : cuda_agent::binding_registry()) entry.second(m);
}
