// fp8jit._fp8jit_torch: the tensor reader of torch_view.hpp, compiled against the torch found at
// configure time. A plain CPython module (torch's headers bring pybind11, which need not meet
// nanobind in one module); it exports nothing but the reader's capsule.
#include <Python.h>
#include <torch/csrc/autograd/python_variable.h>

#include "python/src/torch_view.hpp"

namespace {

using fp8jit::python::TorchDType;
using fp8jit::python::TorchView;

TorchDType dtype_of(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float8_e4m3fn: return TorchDType::e4m3;
    case c10::ScalarType::Float8_e5m2: return TorchDType::e5m2;
    case c10::ScalarType::BFloat16: return TorchDType::bf16;
    case c10::ScalarType::Half: return TorchDType::fp16;
    case c10::ScalarType::Float: return TorchDType::fp32;
    default: return TorchDType::other;
  }
}

int read_view(void* py_object, TorchView* out) {
  auto* o = static_cast<PyObject*>(py_object);
  // Exact tensors only: a subclass may redefine what its attributes say (__torch_function__).
  if (!THPVariable_CheckExact(o)) return 0;
  try {
    const at::Tensor& t = THPVariable_Unpack(o);
    if (!t.defined() || t.layout() != c10::kStrided || !t.has_storage()) return 0;
    const int dims = static_cast<int>(t.dim());
    if (dims < 1 || dims > 2) return 0;
    TorchView v;
    v.cuda_device = t.is_cuda() ? t.get_device() : -1;
    v.dtype = dtype_of(t.scalar_type());
    v.dims = dims;
    for (int i = 0; i < dims; ++i) {
      v.shape[i] = t.size(i);
      v.strides[i] = t.stride(i);
    }
    v.ptr = reinterpret_cast<std::uintptr_t>(t.data_ptr());
    const std::int64_t item = static_cast<std::int64_t>(t.element_size());
    v.storage_elements = static_cast<std::int64_t>(t.storage().nbytes()) / item - t.storage_offset();
    *out = v;
    return 1;
  } catch (...) {  // a tensor without data (fake, meta): the attribute path decides
    return 0;
  }
}

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_fp8jit_torch",
                          "fp8jit.gemm's reader of torch tensors (a capsule for fp8jit._fp8jit)", -1};

}  // namespace

PyMODINIT_FUNC PyInit__fp8jit_torch() {
  PyObject* m = PyModule_Create(&module_def);
  if (m == nullptr) return nullptr;
  PyObject* cap = PyCapsule_New(reinterpret_cast<void*>(&read_view), fp8jit::python::kTorchViewCapsule, nullptr);
  if (cap == nullptr || PyModule_AddObject(m, "view", cap) < 0) {
    Py_XDECREF(cap);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
