from os import PathLike

def write_file(
    directory: str | bytes | PathLike[str],
    temp_name: str,
    final_name: str,
    pieces: list[bytes | bytearray | memoryview],
) -> None: ...
