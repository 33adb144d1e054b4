"""pyiceberg's FileIO with every object-store request counted: ``CountingFileIO``, named by the catalog's
``py-io-impl`` property (``meter.py``), is pyiceberg's own ``PyArrowFileIO`` whose filesystems are wrapped
in a ``pyarrow.fs.PyFileSystem`` over ``CountingHandler``.

Why at the filesystem, not at the FileIO's ``new_input``/``new_output``: pyiceberg reads data files (scans,
the rewrite, the state table's copy-on-write) through ``io.fs_by_scheme`` directly, past the FileIO's
files, and one file costs several requests (an existence check, a size, ranged reads, a multipart upload).
The handler performs every operation through primitives whose requests are known, one call at a time, so
the count is exact by construction rather than estimated from the files a commit added (a snapshot's
summary says nothing of reads, of the existence checks, of multipart parts, or of the uploads of a commit
that lost its race, which are paid for all the same). Why ``PyFileSystem``: Arrow's C++ S3 client has no
hook on its requests, and a Python ``FileSystemHandler`` is pyarrow's own way to put a filesystem under
Arrow's readers and writers; reads and writes then cross into Python once per call, which the lake's
volumes (a commit every minute, a rewrite of at most 64 MiB) afford.

The requests of each primitive are those of Arrow's S3 filesystem (pyarrow 26, as pyiceberg configures
it), read from a server's log (``tests/integration/test_lake_cost.py`` checks them against moto's):
- ``get_file_info(path)``: a HEAD; and a LIST (is it a directory?) when it is not a file;
- listing a directory (``FileSelector``): a LIST per page of 1,000 entries;
- ``open_input_file``, ``open_input_stream``: a HEAD (the size), then a GET per read of at least one byte
  inside the file;
- ``open_output_stream`` to close: a multipart upload, always: a POST (create), a PUT per 10 MiB part (at
  least one), a POST (complete);
- ``delete_file``: a HEAD, the DELETE, and a PUT of the parent's directory marker.

POSTs count as ``PUT`` (S3 bills them as PUT-class requests, as it does LIST). On a local directory
warehouse nothing is sent; the counts are then what the same operations would send to S3, which is what
the console prices. Not seen: requests Arrow's S3 client repeats on its own (throttling, 5xx: retried
inside the SDK), and the region lookup pyiceberg makes when no region is configured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyarrow.fs import FileInfo, FileSelector, FileSystem, FileSystemHandler, FileType, PyFileSystem
from pyiceberg.io.pyarrow import PyArrowFileIO

from pipeline.lake.meter import METER_PROPERTY, LakeMeter, meter_of
from storage.objectstore.base import DELETE, GET, HEAD, LIST, PUT

if TYPE_CHECKING:
    from pyiceberg.typedef import Properties

# Arrow's S3 output stream uploads in parts of this size (its ``kPartUploadSize``).
PART_BYTES = 10 * 1024 * 1024
# ListObjectsV2's page.
LIST_PAGE = 1000


class CountingFileIO(PyArrowFileIO):
    """``PyArrowFileIO`` counting into the meter its properties name (``strata.lake.meter``); without one
    (a catalog opened elsewhere), the plain FileIO."""

    def __init__(self, properties: Properties | None = None) -> None:
        super().__init__(properties or {})
        self.meter = meter_of(self.properties.get(METER_PROPERTY))

    def _initialize_fs(self, scheme: str, netloc: str | None = None) -> FileSystem:
        fs = super()._initialize_fs(scheme, netloc)
        if self.meter is None:
            return fs
        return PyFileSystem(CountingHandler(fs, self.meter))


class CountingHandler(FileSystemHandler):  # type: ignore[misc]
    """Forwards to ``fs``, counting each operation's requests into ``meter`` (the module's table)."""

    def __init__(self, fs: FileSystem, meter: LakeMeter) -> None:
        self.fs = fs
        self.meter = meter

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CountingHandler) and other.fs == self.fs and other.meter is self.meter

    def __ne__(self, other: object) -> bool:
        return not self == other

    def get_type_name(self) -> str:
        return f"counting-{self.fs.type_name}"

    def normalize_path(self, path: str) -> str:
        return str(self.fs.normalize_path(path))

    def get_file_info(self, paths: list[str]) -> list[FileInfo]:
        infos = self.fs.get_file_info(paths)
        for info in infos:
            self.meter.request(HEAD)
            if info.type != FileType.File:
                self.meter.request(LIST)
        return list(infos)

    def get_file_info_selector(self, selector: FileSelector) -> list[FileInfo]:
        infos = self.fs.get_file_info(selector)
        self.meter.request(LIST, max(1, -(-len(infos) // LIST_PAGE)))
        return list(infos)

    def delete_file(self, path: str) -> None:
        self.meter.request(HEAD)
        self.fs.delete_file(path)
        self.meter.request(DELETE)
        self.meter.request(PUT)  # the parent's directory marker
        self.meter.deleted()

    def open_input_file(self, path: str) -> pa.PythonFile:
        self.meter.request(HEAD)
        return pa.PythonFile(CountingInput(self.fs.open_input_file(path), self.meter), mode="r")

    def open_input_stream(self, path: str) -> pa.PythonFile:
        # The same primitives as a random-access file: a HEAD, then a ranged GET per read.
        return self.open_input_file(path)

    def open_output_stream(self, path: str, metadata: dict[str, str] | None) -> pa.PythonFile:
        self.meter.request(PUT)  # CreateMultipartUpload
        inner = self.fs.open_output_stream(path, metadata=metadata)
        return pa.PythonFile(CountingOutput(inner, self.meter), mode="w")

    # pyiceberg's FileIO never makes, moves, copies or appends to anything but through the calls above; an
    # operation whose requests are not counted is refused rather than left uncounted.
    def _refused(self, what: str) -> NotImplementedError:
        return NotImplementedError(f"the lake's counting FileIO does not {what}")

    def create_dir(self, path: str, recursive: bool) -> None:
        raise self._refused("create directories")

    def delete_dir(self, path: str) -> None:
        raise self._refused("delete directories")

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        raise self._refused("delete directories")

    def delete_root_dir_contents(self) -> None:
        raise self._refused("delete directories")

    def move(self, src: str, dest: str) -> None:
        raise self._refused("move files")

    def copy_file(self, src: str, dest: str) -> None:
        raise self._refused("copy files")

    def open_append_stream(self, path: str, metadata: dict[str, str] | None) -> Any:
        raise self._refused("append to files")


class CountingInput:
    """A file being read: a GET per read of at least one byte inside it (Arrow reads a range per call)."""

    def __init__(self, inner: pa.NativeFile, meter: LakeMeter) -> None:
        self._inner = inner
        self._meter = meter
        self._size: int = inner.size()

    def read(self, nbytes: int | None = None) -> bytes:
        position = self._inner.tell()
        want = self._size - position if nbytes is None or nbytes < 0 else nbytes
        data: bytes = self._inner.read(nbytes)
        if want > 0 and position < self._size:
            self._meter.request(GET, read=len(data))
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._inner.seek(offset, whence))

    def tell(self) -> int:
        return int(self._inner.tell())

    def size(self) -> int:
        return self._size

    def close(self) -> None:
        self._inner.close()

    @property
    def closed(self) -> bool:
        return bool(self._inner.closed)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False


class CountingOutput:
    """A multipart upload: a PUT each time a 10 MiB part fills, and at close the last part (or the one
    empty part of an empty file) and the completion. The object counts as written once closed."""

    def __init__(self, inner: pa.NativeFile, meter: LakeMeter) -> None:
        self._inner = inner
        self._meter = meter
        self._written = 0

    def write(self, data: Any) -> int:
        size = memoryview(data).nbytes
        self._inner.write(data)
        before, self._written = self._written, self._written + size
        filled = self._written // PART_BYTES - before // PART_BYTES
        if filled:
            self._meter.request(PUT, filled)
        return size

    def flush(self) -> None:
        self._inner.flush()

    def tell(self) -> int:
        return self._written

    def close(self) -> None:
        if self._inner.closed:
            return
        last_part = 1 if self._written % PART_BYTES or self._written == 0 else 0
        self._meter.request(PUT, last_part + 1)  # the last part, CompleteMultipartUpload
        self._inner.close()
        self._meter.wrote(self._written)

    @property
    def closed(self) -> bool:
        return bool(self._inner.closed)

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def writable(self) -> bool:
        return True
