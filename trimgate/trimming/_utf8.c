/* trimgate.trimming._utf8: the UTF-8 length of a str, counted without encoding it.
 *
 * Sizing a message needs the UTF-8 byte length of its texts (the estimate: ceil(bytes / 4) + 4).
 * For an ASCII str that is len(); for any other, encoding it only to take len() of the
 * result allocated and filled a bytes object as large as the text: about 7% of the CPU
 * of a 2 MB trim (bench/RESULTS.md). This counts from CPython's own storage instead, one
 * comparison per code point, which the compiler vectorises.
 *
 * Lone surrogates count 3 bytes, as str.encode("utf-8", "surrogatepass") writes them.
 * Built with the mypyc modules (setup.py), all or nothing; without it the codecs encode
 * as before (trimgate.trimming.estimate.nonascii_utf8_len).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *
utf8_len(PyObject *module, PyObject *arg)
{
    (void)module;
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "utf8_len() takes a str, not %.100s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(arg) < 0) {
        return NULL;
    }
#endif
    const Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    const void *data = PyUnicode_DATA(arg);
    Py_ssize_t extra = 0;
    switch (PyUnicode_KIND(arg)) {
    case PyUnicode_1BYTE_KIND: {
        const Py_UCS1 *p = (const Py_UCS1 *)data;
        for (Py_ssize_t i = 0; i < n; i++) {
            extra += p[i] >= 0x80;
        }
        break;
    }
    case PyUnicode_2BYTE_KIND: {
        const Py_UCS2 *p = (const Py_UCS2 *)data;
        for (Py_ssize_t i = 0; i < n; i++) {
            extra += (p[i] >= 0x80) + (p[i] >= 0x800);
        }
        break;
    }
    default: {
        const Py_UCS4 *p = (const Py_UCS4 *)data;
        for (Py_ssize_t i = 0; i < n; i++) {
            extra += (p[i] >= 0x80) + (p[i] >= 0x800) + (p[i] >= 0x10000);
        }
        break;
    }
    }
    return PyLong_FromSsize_t(n + extra);
}

static PyMethodDef methods[] = {
    {"utf8_len", utf8_len, METH_O,
     "utf8_len(text, /)\n--\n\n"
     "len(text.encode('utf-8', 'surrogatepass')), without encoding."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "trimgate.trimming._utf8", NULL, 0, methods,
};

PyMODINIT_FUNC
PyInit__utf8(void)
{
    return PyModule_Create(&module);
}
