// Fixed glue of a cuda-agent workspace (read-only: the build uses the package's copy).
//
// Each kernels/*_binding.cpp registers its Python functions here with REGISTER_BINDING; the fixed
// binding.cpp creates the `cuda_extension` module and applies every registration. The headers
// below are the light ones: ATen's Tensor and allocation functions plus torch's pybind11 glue,
// not <torch/extension.h>, which takes three times as long to compile.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/Exception.h>
#include <torch/csrc/utils/pybind.h>

#include <utility>
#include <vector>

namespace cuda_agent {

using BindingFn = void (*)(pybind11::module_&);

inline std::vector<std::pair<const char*, BindingFn>>& binding_registry() {
    static std::vector<std::pair<const char*, BindingFn>> registry;
    return registry;
}

struct BindingRegistrar {
    BindingRegistrar(const char* name, BindingFn fn) { binding_registry().emplace_back(name, fn); }
};

}  // namespace cuda_agent

// REGISTER_BINDING(unique_name, [](pybind11::module_& m) { m.def("name", &function, "doc"); });
#define REGISTER_BINDING(NAME, FN) static ::cuda_agent::BindingRegistrar cuda_agent_binding_##NAME(#NAME, FN)
