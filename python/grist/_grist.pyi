"""Type stubs of the extension module ``grist._grist`` (built from
crates/python). Use the wrappers of ``grist`` (``grist.Loader``, ...): the
arguments here are already normalised by them."""

from typing import Any, Optional, Sequence

__version__: str

class GristError(Exception):
    """An error of grist; ``location`` names where in the data it happened."""

    location: Optional[dict[str, Any]]
    def __init__(self, message: str, location: Optional[dict[str, Any]] = ...) -> None: ...

class SpecError(GristError, ValueError):
    """A bad argument: a spec, an option, a path, or what a format cannot hold."""

class DataError(GristError):
    """Bad data: damaged files, records that do not fit the spec, a limit hit."""

class StorageError(GristError, OSError):
    """Reading or writing a file or object failed."""

class ArrowBatch:
    """A record batch exported through the Arrow C data interface."""

    @property
    def num_rows(self) -> int: ...
    def __arrow_c_schema__(self) -> object: ...
    def __arrow_c_array__(self, requested_schema: Optional[object] = ...) -> tuple[object, object]: ...
    def __len__(self) -> int: ...

class _Loader:
    def __init__(
        self,
        paths: list[str],
        spec_json: Optional[str],
        spec_path: Optional[str],
        format: Optional[str],
        batch_size: Optional[int],
        shuffle: bool,
        seed: int,
        shuffle_buffer: Optional[int],
        threads: Optional[int],
        shard: Optional[tuple[int, int]],
        shard_mode: str,
        epochs: Optional[int],
        drop_remainder: bool,
        reader_schema: Optional[str],
        random_access: str,
        output: str,
        payload: Optional[str] = ...,
        equal_batches: bool = ...,
        decode_ahead: bool = ...,
        mmap: bool = ...,
    ) -> None: ...
    def next_batch(self) -> Optional[Any]: ...
    def state_json(self) -> str: ...
    def restore_json(self, state: str) -> None: ...
    @property
    def format(self) -> str: ...
    @property
    def spec_json(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def random_access(self) -> bool: ...
    def stats(self) -> dict[str, Any]: ...
    def close(self) -> None: ...

class _RecordReader:
    def __init__(
        self,
        paths: list[str],
        spec_json: Optional[str],
        spec_path: Optional[str],
        format: Optional[str],
        output: str,
        payload: Optional[str] = ...,
    ) -> None: ...
    def read(self, indices: Sequence[int]) -> Any: ...
    @property
    def counts(self) -> list[int]: ...
    @property
    def files(self) -> list[str]: ...
    @property
    def format(self) -> str: ...
    @property
    def spec_json(self) -> str: ...
    def __len__(self) -> int: ...

class _Writer:
    def __init__(
        self,
        path: str,
        format: str,
        spec_json: Optional[str],
        spec_path: Optional[str],
        compression: Optional[str],
        codec: Optional[str],
        lossy: bool,
    ) -> None: ...
    def write_numpy(self, batch: dict[str, Any]) -> None: ...
    def write_arrow(self, data: Any) -> None: ...
    def close(self) -> tuple[int, str]: ...
    def abort(self) -> None: ...
    @property
    def records(self) -> int: ...
    @property
    def spec_json(self) -> Optional[str]: ...
    @property
    def path(self) -> str: ...

def infer_spec_json(
    paths: list[str],
    records: int = ...,
    format: Optional[str] = ...,
    reader_schema: Optional[str] = ...,
) -> str: ...
def count(paths: list[str], format: Optional[str] = ...) -> int: ...
def release_maps() -> int: ...
def convert(
    inputs: list[str],
    output: str,
    to: str,
    spec_json: Optional[str],
    spec_path: Optional[str],
    args: dict[str, Any],
) -> str: ...
def list_files(
    paths: list[str], format: Optional[str] = ..., payload: Optional[str] = ...
) -> list[tuple[str, int]]: ...
def part_name(
    format: str, part: int, compression: Optional[str] = ..., codec: Optional[str] = ...
) -> str: ...
def write_spec(
    folder: str,
    format: str,
    spec_json: str,
    compression: Optional[str] = ...,
    codec: Optional[str] = ...,
    lossy: bool = ...,
) -> str: ...
