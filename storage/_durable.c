/* storage._durable: one object of the local store written durably in one call that gives up the GIL once.

Why native code: a put of the local object store is a create, writes, an fsync, a close, a rename and the
directory's fsync. Written in Python each of these gives up the GIL and must win it back, and on an agent
whose event loop keeps the interpreter busy with thousands of requests a second each win waits for the
loop: measured under the latency load of the benchmarks, a put that takes about 2 ms on the idle machine
took 5-6 ms in its thread (docs/benchmarks.md). Here the GIL is given up once, for the whole sequence.

write_file(directory, temp_name, final_name, pieces) -> None
    directory: the object's directory (it exists); temp_name and final_name: entries in it (no '/').
    pieces: a list of objects with the buffer protocol, written in order.

    1. open(directory/temp_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)
    2. writev of the pieces, IOV_MAX at a time, resumed after a short write (a write of nothing is EIO)
    3. fsync, close
    4. rename(temp_name, final_name), within the directory (atomic: the object appears whole or not at all)
    5. fsync of the directory, so that the rename survives a crash

    Every call but close is retried when a signal interrupts it (EINTR), as Python's own are.
    Errors: OSError with the errno and the path of the step that failed. If the temporary file was
    created, it is removed before the error is raised, and the final name is never touched (the rename is
    the last step that changes the directory). An empty list writes an empty object.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

enum step { STEP_NONE, STEP_OPEN, STEP_WRITE, STEP_FSYNC, STEP_CLOSE, STEP_RENAME, STEP_DIR_OPEN, STEP_DIR_FSYNC };

/* A system call retried while a signal interrupts it (EINTR), as Python's own wrappers do (PEP 475): the
process's signal handlers are installed without SA_RESTART. Not for close, which must not be repeated. */
#define RETRY_EINTR(result, call)                                                                            \
    do {                                                                                                     \
        (result) = (call);                                                                                   \
    } while ((result) < 0 && errno == EINTR)

/* The whole sequence, without the GIL. Returns the failed step (STEP_NONE on success) and its errno. */
static enum step write_durably(const char *dir, const char *temp_path, const char *final_path, struct iovec *iov,
                               Py_ssize_t count, int *err) {
    int fd, rc;
    RETRY_EINTR(fd, open(temp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (fd < 0) {
        *err = errno; /* EEXIST included: that file is not this call's to remove */
        return STEP_OPEN;
    }
    enum step failed = STEP_NONE;
    Py_ssize_t first = 0;
    while (first < count) {
        int batch = (int)((count - first) < IOV_MAX ? (count - first) : IOV_MAX);
        size_t wanted = 0;
        for (int i = 0; i < batch; i++)
            wanted += iov[first + i].iov_len;
        ssize_t written;
        RETRY_EINTR(written, writev(fd, iov + first, batch));
        if (written < 0) {
            failed = STEP_WRITE;
            break;
        }
        if (written == 0 && wanted > 0) {
            /* A regular file takes at least one byte or fails; a 0 here would repeat forever. */
            errno = EIO;
            failed = STEP_WRITE;
            break;
        }
        /* Skip the pieces written whole (empty ones too); trim the one a short write stopped in. */
        while (first < count && (size_t)written >= iov[first].iov_len) {
            written -= (ssize_t)iov[first].iov_len;
            first++;
        }
        if (written > 0) {
            iov[first].iov_base = (char *)iov[first].iov_base + written;
            iov[first].iov_len -= (size_t)written;
        }
    }
    if (failed == STEP_NONE) {
        RETRY_EINTR(rc, fsync(fd));
        if (rc != 0)
            failed = STEP_FSYNC;
    }
    if (failed != STEP_NONE) {
        *err = errno;
        close(fd);
        unlink(temp_path);
        return failed;
    }
    if (close(fd) != 0) {
        *err = errno;
        unlink(temp_path);
        return STEP_CLOSE;
    }
    RETRY_EINTR(rc, rename(temp_path, final_path));
    if (rc != 0) {
        *err = errno;
        unlink(temp_path);
        return STEP_RENAME;
    }
    int dfd;
    RETRY_EINTR(dfd, open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dfd < 0) {
        *err = errno;
        return STEP_DIR_OPEN;
    }
    RETRY_EINTR(rc, fsync(dfd));
    if (rc != 0) {
        *err = errno;
        close(dfd);
        return STEP_DIR_FSYNC;
    }
    close(dfd);
    return STEP_NONE;
}

static PyObject *write_file(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *dir_obj, *temp_obj, *final_obj, *pieces;
    if (!PyArg_ParseTuple(args, "O&O&O&O!:write_file", PyUnicode_FSConverter, &dir_obj, PyUnicode_FSConverter,
                          &temp_obj, PyUnicode_FSConverter, &final_obj, &PyList_Type, &pieces))
        return NULL;
    PyObject *result = NULL;
    PyObject *temp_path = NULL, *final_path = NULL;
    Py_buffer *views = NULL;
    struct iovec *iov = NULL;
    /* A tuple of the pieces, held for the call: the list itself could change while buffers are taken. */
    PyObject *items = PyList_AsTuple(pieces);
    if (items == NULL) {
        Py_DECREF(dir_obj);
        Py_DECREF(temp_obj);
        Py_DECREF(final_obj);
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(items), held = 0;
    const char *dir = PyBytes_AS_STRING(dir_obj);
    const char *temp = PyBytes_AS_STRING(temp_obj), *final = PyBytes_AS_STRING(final_obj);
    if (strchr(temp, '/') != NULL || strchr(final, '/') != NULL || temp[0] == '\0' || final[0] == '\0') {
        PyErr_SetString(PyExc_ValueError, "write_file: names are entries of the directory, without '/'");
        goto done;
    }
    temp_path = PyBytes_FromFormat("%s/%s", dir, temp);
    final_path = PyBytes_FromFormat("%s/%s", dir, final);
    if (temp_path == NULL || final_path == NULL)
        goto done;
    views = PyMem_Calloc((size_t)(count ? count : 1), sizeof(Py_buffer));
    iov = PyMem_Calloc((size_t)(count ? count : 1), sizeof(struct iovec));
    if (views == NULL || iov == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* Buffers held for the whole call: nothing they refer to can move or be resized meanwhile. */
    for (; held < count; held++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(items, held), &views[held], PyBUF_SIMPLE) < 0)
            goto done;
        iov[held].iov_base = views[held].buf;
        iov[held].iov_len = (size_t)views[held].len;
    }
    int err = 0;
    enum step failed;
    const char *tp = PyBytes_AS_STRING(temp_path), *fp = PyBytes_AS_STRING(final_path);
    Py_BEGIN_ALLOW_THREADS
    failed = write_durably(dir, tp, fp, iov, count, &err);
    Py_END_ALLOW_THREADS
    if (failed != STEP_NONE) {
        PyObject *where_bytes = (failed == STEP_DIR_OPEN || failed == STEP_DIR_FSYNC) ? dir_obj
                                : failed == STEP_RENAME ? final_path : temp_path;
        PyObject *where = PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(where_bytes),
                                                           PyBytes_GET_SIZE(where_bytes));
        if (where != NULL) {
            errno = err;
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, where);
            Py_DECREF(where);
        }
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t i = 0; i < held; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(iov);
    Py_XDECREF(temp_path);
    Py_XDECREF(final_path);
    Py_DECREF(items);
    Py_DECREF(dir_obj);
    Py_DECREF(temp_obj);
    Py_DECREF(final_obj);
    return result;
}

static PyMethodDef methods[] = {
    {"write_file", write_file, METH_VARARGS,
     "write_file(directory, temp_name, final_name, pieces): the pieces written to a new file, fsynced, "
     "renamed into place and the directory fsynced, with the GIL given up once."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT, .m_name = "storage._durable", .m_doc = NULL, .m_size = -1, .m_methods = methods,
};

PyMODINIT_FUNC PyInit__durable(void) { return PyModule_Create(&module); }
