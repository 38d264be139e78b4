// python/src/module.cpp -- the extension module nnlens._core: its parts (one source per
// technique) and the one exception translator: every nnlens::error becomes nnlens.Error (a subclass
// per kind, e.g. ShapeError for nnlens::shape_error) carrying the library's message.
#include <nnlens/config.hpp>

#include "common.hpp"

namespace nnlens_python {
using namespace nnlens;  // NOLINT: the library's vocabulary (the module's own names are outside nnlens: pybind11's unqualified calls must not find nnlens's by ADL)
namespace {

/// The Python class of an nnlens::error's kind.
struct error_classes {
  py::object base, shape, value, io, data, logic, limit;
};
error_classes& classes() {
  static error_classes* c = new error_classes();  // never destroyed: lives as long as the interpreter
  return *c;
}

py::object make_class(py::module_& m, const char* name, py::handle base, const char* doc) {
  py::object cls = py::reinterpret_steal<py::object>(
      PyErr_NewExceptionWithDoc((std::string("nnlens.") + name).c_str(), doc, base.ptr(), nullptr));
  if (!cls) throw py::error_already_set();
  m.attr(name) = cls;
  return cls;
}

}  // namespace
}  // namespace nnlens_python

PYBIND11_MODULE(_core, m) {
  using namespace nnlens_python;
  m.doc() = "nnlens' compiled core (import nnlens, not this module)";
  m.attr("__version__") = NNLENS_PYTHON_VERSION;
  auto& c = classes();
  c.base = make_class(m, "Error", PyExc_Exception,
                      "An error nnlens reports: bad input (a wrong shape, NaN, a file that is not a model), a "
                      "limit passed, a model an analysis cannot take.  The message names what and where.");
  c.shape = make_class(m, "ShapeError", c.base, "An array or model of the wrong shape.");
  c.value = make_class(m, "InvalidValueError", c.base, "A value out of range: NaN/Inf input, a bad option.");
  c.io = make_class(m, "FormatError", c.base, "A file or buffer that cannot be read as what it should be.");
  c.data = make_class(m, "DataError", c.base, "Data that does not fit: an empty set, a profile of another model.");
  c.logic = make_class(m, "UnsupportedError", c.base, "A model an analysis cannot take (e.g. not piecewise-linear).");
  c.limit = make_class(m, "LimitError", c.base, "A limit passed (max_pieces, max_memory).");
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const nnlens::shape_error& e) {
      PyErr_SetString(classes().shape.ptr(), e.what());
    } catch (const nnlens::value_error& e) {
      PyErr_SetString(classes().value.ptr(), e.what());
    } catch (const nnlens::io_error& e) {
      PyErr_SetString(classes().io.ptr(), e.what());
    } catch (const nnlens::data_error& e) {
      PyErr_SetString(classes().data.ptr(), e.what());
    } catch (const nnlens::logic_error& e) {
      PyErr_SetString(classes().logic.ptr(), e.what());
    } catch (const nnlens::limit_error& e) {
      PyErr_SetString(classes().limit.ptr(), e.what());
    } catch (const nnlens::error& e) {
      PyErr_SetString(classes().base.ptr(), e.what());
    }
  });
  register_load(m);
  register_network(m);
  register_exactline(m);
  register_nnslicer(m);
  register_coverage(m);
  register_neusemslice(m);
  register_difftest(m);
}
