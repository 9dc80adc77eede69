// fp8jit.gemm on torch tensors, its common case read in C++: the Python checks make ~25 torch
// queries and ~25 Python calls per GEMM (8 µs over the C++ call on an H100 host), most of it
// interpreter overhead. This path reads each tensor once, from its at::Tensor through
// fp8jit._fp8jit_torch where that module was built (torch_view.hpp), else through the CPython API
// (~30 attribute reads, ~3 µs per call), and accepts only what fp8jit/_ops.py's checks accept,
// deriving the same leading dimensions, scale layouts and scale reaches; anything else (a bias,
// another device than the current one, a layout or dtype the checks would refuse, ...) goes to the
// checked Python path, which raises the precise error. The runtime checks the arguments again
// before it launches.
#include <nanobind/nanobind.h>

#include <array>
#include <climits>
#include <cstdint>
#include <optional>
#include <string_view>

#include "fp8jit/fp8jit.hpp"
#include "python/src/enums.hpp"
#include "python/src/torch_view.hpp"

namespace nb = nanobind;

namespace fp8jit::python {
namespace {

// torch's objects the path compares with or calls, resolved on the first call.
struct Torch {
  nb::object tensor_type, empty, current_device, raw_stream, e4m3, e5m2, bf16, fp16, fp32, device_key;
  PyObject *s_shape, *s_stride, *s_dtype, *s_get_device, *s_is_cuda, *s_data_ptr, *s_device, *s_storage,
      *s_nbytes, *s_offset;
  TorchViewFn read_view = nullptr;  // fp8jit._fp8jit_torch's reader where it was built and loads
  PyObject* dtypes[6] = {};         // TorchDType -> torch's dtype object (nullptr: other)
};

const Torch* torch_objects() {
  static const Torch* t = [] {
    auto* o = new Torch;  // lives as long as the process, like the torch module itself
    nb::module_ torch = nb::module_::import_("torch");
    o->tensor_type = torch.attr("Tensor");
    o->empty = torch.attr("empty");
    o->current_device = torch.attr("_C").attr("_cuda_getDevice");
    o->raw_stream = torch.attr("_C").attr("_cuda_getCurrentRawStream");
    o->e4m3 = torch.attr("float8_e4m3fn");
    o->e5m2 = torch.attr("float8_e5m2");
    o->bf16 = torch.attr("bfloat16");
    o->fp16 = torch.attr("float16");
    o->fp32 = torch.attr("float32");
    o->device_key = nb::str("device");
    for (auto [slot, name] : {std::pair{&o->s_shape, "shape"}, {&o->s_stride, "stride"}, {&o->s_dtype, "dtype"},
                              {&o->s_get_device, "get_device"}, {&o->s_is_cuda, "is_cuda"},
                              {&o->s_data_ptr, "data_ptr"}, {&o->s_device, "device"},
                              {&o->s_storage, "untyped_storage"}, {&o->s_nbytes, "nbytes"},
                              {&o->s_offset, "storage_offset"}})
      *slot = PyUnicode_InternFromString(name);
    o->dtypes[static_cast<int>(TorchDType::e4m3)] = o->e4m3.ptr();
    o->dtypes[static_cast<int>(TorchDType::e5m2)] = o->e5m2.ptr();
    o->dtypes[static_cast<int>(TorchDType::bf16)] = o->bf16.ptr();
    o->dtypes[static_cast<int>(TorchDType::fp16)] = o->fp16.ptr();
    o->dtypes[static_cast<int>(TorchDType::fp32)] = o->fp32.ptr();
    // Missing (no torch headers at build time) or built for another torch (an import error):
    // every tensor is read through its attributes.
    // (PyCapsule_Import would look the submodule up as the package's attribute, which it is only
    // once imported.)
    if (PyObject* reader = PyImport_ImportModule("fp8jit._fp8jit_torch")) {
      PyObject* cap = PyObject_GetAttrString(reader, "view");
      o->read_view =
          cap ? reinterpret_cast<TorchViewFn>(PyCapsule_GetPointer(cap, kTorchViewCapsule))
              : nullptr;
      Py_XDECREF(cap);
      Py_DECREF(reader);  // sys.modules keeps it
    }
    if (o->read_view == nullptr) PyErr_Clear();
    return o;
  }();
  return t;
}

// One tensor as the checks see it; ok false where it is not a 1-D or 2-D CUDA tensor on `device`.
struct View {
  bool ok = false;
  PyObject* dtype = nullptr;  // borrowed from torch's dtype singletons
  std::uintptr_t ptr = 0;
  int dims = 0;
  std::array<std::int64_t, 2> shape{}, strides{};
  std::int64_t storage_elements = -1;  // from the first element to the storage's end; -1: not read
};

std::optional<std::int64_t> as_int(PyObject* o) {
  if (o == nullptr) return std::nullopt;
  const long long v = PyLong_AsLongLong(o);
  Py_DECREF(o);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return std::nullopt;
  }
  return v;
}

bool tuple_of(PyObject* o, View& v) {
  if (o == nullptr || !PyTuple_Check(o) || PyTuple_GET_SIZE(o) < 1 || PyTuple_GET_SIZE(o) > 2) {
    Py_XDECREF(o);
    PyErr_Clear();
    return false;
  }
  v.dims = static_cast<int>(PyTuple_GET_SIZE(o));
  for (int i = 0; i < v.dims; ++i) v.shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(o, i));
  Py_DECREF(o);
  return !PyErr_Occurred();
}

View view(const Torch& T, PyObject* t, int device) {
  View v;
  if (TorchView tv; T.read_view != nullptr && t != nullptr && T.read_view(t, &tv)) {
    if (tv.cuda_device != device) return v;
    v.dtype = T.dtypes[static_cast<int>(tv.dtype)];
    v.dims = tv.dims;
    v.shape = {tv.shape[0], tv.shape[1]};
    v.strides = {tv.strides[0], tv.strides[1]};
    v.ptr = tv.ptr;
    v.storage_elements = tv.storage_elements;
    v.ok = true;
    return v;
  }
  if (t == nullptr || !PyObject_TypeCheck(t, reinterpret_cast<PyTypeObject*>(T.tensor_type.ptr()))) return v;
  const auto dev = as_int(PyObject_CallMethodNoArgs(t, T.s_get_device));
  if (!dev || *dev < 0 || *dev != device) return v;
  PyObject* is_cuda = PyObject_GetAttr(t, T.s_is_cuda);  // get_device() also indexes other backends
  Py_XDECREF(is_cuda);
  if (is_cuda != Py_True) return PyErr_Clear(), v;
  PyObject* dtype = PyObject_GetAttr(t, T.s_dtype);
  if (dtype == nullptr) return PyErr_Clear(), v;
  v.dtype = dtype;
  Py_DECREF(dtype);  // torch's dtypes are module-level singletons
  if (!tuple_of(PyObject_GetAttr(t, T.s_shape), v)) return v;
  View st;
  if (!tuple_of(PyObject_CallMethodNoArgs(t, T.s_stride), st) || st.dims != v.dims) return v;
  v.strides = st.shape;
  const auto p = as_int(PyObject_CallMethodNoArgs(t, T.s_data_ptr));
  if (!p) return v;
  v.ptr = static_cast<std::uintptr_t>(*p);
  v.ok = true;
  return v;
}

// _rows: the row stride of a 2-D tensor whose rows are contiguous; nullopt where refused.
std::optional<std::int64_t> rows_stride(const View& v) {
  if (v.dims != 2 || (v.shape[1] > 1 && v.strides[1] != 1) || (v.shape[0] > 1 && v.strides[0] < v.shape[1]))
    return std::nullopt;
  return v.strides[0];
}

bool contiguous(const View& v) {
  if (v.dims == 1) return v.shape[0] < 2 || v.strides[0] == 1;
  return (v.shape[1] < 2 || v.strides[1] == 1) && (v.shape[0] < 2 || v.strides[0] == v.shape[1]);
}

// _scale_layout_of and _floats_reachable for a non-empty fp32 scale tensor.
std::optional<ScaleLayout> scale_layout(const View& v, std::int64_t rows) {
  if (v.dims == 2 && v.strides[0] == 1) {
    if (v.shape[1] > 1 && v.strides[1] == (rows + 3) / 4 * 4) return ScaleLayout::col_major_tma;
    if (v.shape[1] == 1 && rows % 4 == 0) return ScaleLayout::row_major;
  }
  if (!contiguous(v)) return std::nullopt;
  return ScaleLayout::row_major;
}

std::optional<std::int64_t> floats_reachable(const Torch& T, PyObject* t, const View& v) {
  const std::int64_t rows = v.shape[0], cols = v.dims == 2 ? v.shape[1] : 1;
  if (rows * cols <= 0) return std::nullopt;  // empty: the checked path
  const bool column_major = v.dims == 2 && v.strides[0] == 1 && rows % 4 != 0;
  if (!column_major && contiguous(v)) return rows * cols;
  if (v.dims != 2) return std::nullopt;
  const std::int64_t extent = 1 + (rows - 1) * v.strides[0] + (cols - 1) * v.strides[1];
  // torch keeps every view inside its storage, so only the padding past the last column's rows
  // needs the storage's size (three more torch calls).
  if (!column_major) return extent;
  if (v.storage_elements >= 0) return std::min(extent + (4 - rows % 4) % 4, v.storage_elements);
  PyObject* storage = PyObject_CallMethodNoArgs(t, T.s_storage);
  const auto bytes = storage ? as_int(PyObject_CallMethodNoArgs(storage, T.s_nbytes)) : std::nullopt;
  Py_XDECREF(storage);
  const auto offset = as_int(PyObject_CallMethodNoArgs(t, T.s_offset));
  if (!bytes || !offset) return PyErr_Clear(), std::nullopt;
  return std::min(extent + (4 - rows % 4) % 4, *bytes / 4 - *offset);
}

std::optional<Fp8Format> fp8_of(const Torch& T, PyObject* dtype) {
  if (dtype == T.e4m3.ptr()) return Fp8Format::e4m3;
  if (dtype == T.e5m2.ptr()) return Fp8Format::e5m2;
  return std::nullopt;
}

std::optional<DType> out_of(const Torch& T, PyObject* dtype) {
  if (dtype == T.bf16.ptr()) return DType::bf16;
  if (dtype == T.fp16.ptr()) return DType::fp16;
  if (dtype == T.fp32.ptr()) return DType::fp32;
  return std::nullopt;
}

// One operand's scales: their layout and reach, checked as _gemm_scales does.
bool scales_of(const Torch& T, PyObject* t, int device, Granularity g, std::int64_t rows, std::int64_t k,
               const float*& ptr, std::int64_t& reach, ScaleLayout& layout) {
  const View v = view(T, t, device);
  if (!v.ok || v.dtype != T.fp32.ptr()) return false;
  const auto l = g == Granularity::group128 ? scale_layout(v, rows) : std::optional{ScaleLayout::row_major};
  if (!l) return false;
  const auto r = floats_reachable(T, t, v);
  if (!r || *r < scale_count(g, *l, rows, k)) return false;
  ptr = reinterpret_cast<const float*>(v.ptr);
  reach = *r;
  layout = *l;
  return true;
}

// fp8jit.gemm's common case; None where the checked Python path must take the call.
nb::object gemm_fast(const Torch& T, nb::handle a, nb::handle b, nb::handle sa, nb::handle sb,
                     nb::handle out, nb::handle out_dtype, nb::handle scale, nb::handle bias,
                     bool fast_accum, nb::handle max_sms, nb::handle stream) {
  const std::optional<ScaleMode> mode =
      PyUnicode_Check(scale.ptr()) ? parse_scale_mode(PyUnicode_AsUTF8(scale.ptr())) : std::nullopt;
  if (!mode || !bias.is_none() || !PyLong_CheckExact(max_sms.ptr())) return nb::none();
  const long long budget = PyLong_AsLongLong(max_sms.ptr());
  const auto device = as_int(PyObject_CallNoArgs(T.current_device.ptr()));
  // A budget beyond an int: the checked path, which caps it (more SMs than any GPU has: all).
  if (!device || budget < 0 || budget > INT_MAX) return PyErr_Clear(), nb::none();
  const int dev = static_cast<int>(*device);
  const View va = view(T, a.ptr(), dev), vb = view(T, b.ptr(), dev);
  if (!va.ok || !vb.ok) return nb::none();
  const auto fa = fp8_of(T, va.dtype), fb = fp8_of(T, vb.dtype);
  const auto lda = rows_stride(va), ldb = rows_stride(vb);
  if (!fa || !fb || !lda || !ldb || vb.shape[1] != va.shape[1]) return nb::none();
  GemmArgs g;
  g.m = va.shape[0];
  g.k = va.shape[1];
  g.n = vb.shape[0];
  g.a = reinterpret_cast<const void*>(va.ptr);
  g.b = reinterpret_cast<const void*>(vb.ptr);
  g.a_format = *fa;
  g.b_format = *fb;
  g.lda = *lda;
  g.ldb = *ldb;
  g.scale_mode = *mode;
  g.fast_accum = fast_accum;
  g.max_sms = static_cast<int>(budget);
  const Granularity ga = *mode == ScaleMode::tensor    ? Granularity::tensor
                         : *mode == ScaleMode::rowwise ? Granularity::row
                                                       : Granularity::group128;
  const Granularity gb = *mode == ScaleMode::block ? Granularity::block128 : ga;
  if (!scales_of(T, sa.ptr(), dev, ga, g.m, g.k, g.scale_a, g.scale_a_size, g.scale_a_layout) ||
      !scales_of(T, sb.ptr(), dev, gb, g.n, g.k, g.scale_b, g.scale_b_size, g.scale_b_layout))
    return nb::none();
  const auto d_dtype = out_dtype.is_none() ? std::optional{DType::bf16} : out_of(T, out_dtype.ptr());
  if (!d_dtype) return nb::none();
  nb::object d;
  if (out.is_none()) {
    nb::object dtype = out_dtype.is_none() ? T.bf16 : nb::borrow(out_dtype);
    d = T.empty(nb::make_tuple(g.m, g.n), nb::arg("dtype") = dtype, nb::arg("device") = a.attr(T.device_key));
  } else {
    d = nb::borrow(out);
  }
  const View vd = view(T, d.ptr(), dev);
  const auto ldd = rows_stride(vd);
  if (!vd.ok || out_of(T, vd.dtype) != d_dtype || !ldd || vd.shape[0] != g.m || vd.shape[1] != g.n) return nb::none();
  g.d = reinterpret_cast<void*>(vd.ptr);
  g.d_dtype = *d_dtype;
  g.ldd = *ldd;
  std::uintptr_t s = 0;
  if (stream.is_none()) {
    const nb::int_ index(dev);
    const auto raw = as_int(PyObject_CallOneArg(T.raw_stream.ptr(), index.ptr()));
    if (!raw) return nb::none();
    s = static_cast<std::uintptr_t>(*raw);
  } else if (PyLong_CheckExact(stream.ptr())) {
    s = static_cast<std::uintptr_t>(PyLong_AsUnsignedLongLongMask(stream.ptr()));
  } else {
    return nb::none();  // a torch.cuda.Stream: the checked path reads its handle
  }
  {
    nb::gil_scoped_release unlocked;
    default_runtime().gemm(g, reinterpret_cast<CUstream>(s));
  }
  return d;
}

// fp8jit.gemm itself: the Python function around it cost about as much host time as the C++
// launch (a frame, keyword handling and a second call). Whatever the common case does not take
// goes to fp8jit._ops._gemm_checked, which checks every argument and raises the precise error.
nb::object gemm_entry(nb::handle a, nb::handle b, nb::handle sa, nb::handle sb, nb::handle scale,
                      nb::handle out_dtype, nb::handle bias, nb::handle fast_accum, nb::handle out,
                      nb::handle stream, nb::handle max_sms) {
  static const Torch* torch = nullptr;
  if (torch == nullptr) {
    try {
      torch = torch_objects();
    } catch (const nb::python_error&) {
      // No torch: the checked path says how to get it.
    }
  }
  if (torch != nullptr && (fast_accum.ptr() == Py_True || fast_accum.ptr() == Py_False)) {
    nb::object d = gemm_fast(*torch, a, b, sa, sb, out, out_dtype, scale, bias,
                             fast_accum.ptr() == Py_True, max_sms, stream);
    if (!d.is_none()) return d;
  }
  // Looked up per call (off the common path), so that tests can see which calls come through.
  nb::object checked = nb::module_::import_("fp8jit._ops").attr("_gemm_checked");
  return checked(a, b, sa, sb, scale, out_dtype, bias, fast_accum, out, stream, max_sms);
}

// The common case alone, for the tests: D, or None where gemm_tensors would hand over the call.
nb::object gemm_common(nb::handle a, nb::handle b, nb::handle sa, nb::handle sb, nb::handle out,
                       nb::handle out_dtype, nb::handle scale, nb::handle bias, bool fast_accum,
                       nb::handle max_sms, nb::handle stream) {
  return gemm_fast(*torch_objects(), a, b, sa, sb, out, out_dtype, scale, bias, fast_accum, max_sms,
                   stream);
}

}  // namespace

void bind_gemm_tensors(nb::module_& m) {
  m.def(
      "gemm_tensors", &gemm_entry, nb::arg("a"), nb::arg("b"), nb::arg("scale_a"),
      nb::arg("scale_b"), nb::kw_only(), nb::arg("scale") = "block",
      nb::arg("out_dtype").none() = nb::none(), nb::arg("bias").none() = nb::none(),
      nb::arg("fast_accum") = false, nb::arg("out").none() = nb::none(),
      nb::arg("stream").none() = nb::none(), nb::arg("max_sms") = 0,
      "D [M, N] = (A [M, K] scaled) @ (B [N, K] scaled)^T (+ bias [N]), A and B FP8 with K\n"
      "contiguous. ``scale``: 'block' (A 1x128 [M, ceil(K/128)], row-major or column-major padded "
      "to 4\n"
      "rows; B 128x128 [ceil(N/128), ceil(K/128)]), 'tensor' (one each), 'rowwise' ([M] and [N]) "
      "or\n"
      "'group' (1x128 both). ``out_dtype`` torch.bfloat16 (default), float16 or float32; ``out`` "
      "a\n"
      "preallocated D; ``stream`` a torch.cuda.Stream or a raw handle (default: torch's current).\n"
      "``max_sms``: the most SMs the GEMM may occupy (leaving the rest to kernels beside it); 0: "
      "the\n"
      "runtime's budget (FP8JIT_MAX_SMS), else all. Returns D.");
  m.def(
      "torch_reader_loaded", [] { return torch_objects()->read_view != nullptr; },
      "Whether gemm reads torch tensors through fp8jit._fp8jit_torch (built where torch's headers\n"
      "were found) rather than their Python attributes.");
  m.def("gemm_common", &gemm_common, nb::arg("a"), nb::arg("b"), nb::arg("scale_a"),
        nb::arg("scale_b"), nb::arg("out").none(), nb::arg("out_dtype").none(), nb::arg("scale"),
        nb::arg("bias").none(), nb::arg("fast_accum"), nb::arg("max_sms"), nb::arg("stream").none(),
        "gemm_tensors' common case alone (D, or None where the checked path would take the call).");
}

}  // namespace fp8jit::python
