"""Reading files that may be hostile: ``.npz`` archives and JSON text, sizes and nesting bounded first.

``numpy.load`` allocates what an array's header declares, so a 4 KB file declaring 10^10 floats
asks for 75 GiB. :func:`read_npz` reads every member's header first and refuses a member whose
declared array does not fill exactly the bytes the archive holds for it (a stored member's bytes
are in the file; a compressed one may expand at most as far as deflate can, about 1032 times),
a member that is not an ``.npy`` array, and arrays of objects (``allow_pickle=False``). Every
error is a ``ValueError`` naming the member. :func:`loads_json` refuses text longer than a bound
or nested deeper than a bound before parsing it (Python's parser recurses once per level).
"""

from __future__ import annotations

import json
import os
import re
import zipfile

import numpy as np

__all__ = ["read_npz", "loads_json"]

# Deflate's largest expansion is about 1032:1; a member declaring more bytes than that lies.
_MAX_EXPANSION = 1032


def _member_header(fh, name: str):
    """``(shape, fortran_order, dtype)`` of an ``.npy`` member, read from its header only."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        if version == (1, 0):
            return fmt.read_array_header_1_0(fh)
        if version == (2, 0):
            return fmt.read_array_header_2_0(fh)
    except (ValueError, EOFError, OSError, SyntaxError, TypeError) as err:
        raise ValueError(f"entry {name!r} is not a NumPy array ({err})") from None
    raise ValueError(f"entry {name!r} has the unsupported .npy format version {version}")


def read_npz(path, *, text_entries=(), max_text_chars: int = 1_000_000) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` archive ``path``, each checked against the bytes that hold it.

    Parameters
    ----------
    path : str or path-like
        The archive.
    text_entries : collection of str
        Entries that may hold a string (a 0-d unicode array of at most
        ``max_text_chars`` characters); every other entry must hold numbers or booleans.
    max_text_chars : int
        Longest string a text entry may hold.

    Returns
    -------
    dict of entry name (without ``.npy``) to ndarray

    Raises
    ------
    ValueError
        Not a zip archive, a member that is not an ``.npy`` array, a declared
        size that the archive does not hold, an object or text array where numbers belong.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "a.npz")
    >>> np.savez(path, x=np.arange(3.0))
    >>> read_npz(path)["x"].tolist()
    [0.0, 1.0, 2.0]
    """
    path = os.fspath(path)
    size = os.path.getsize(path)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as err:
        raise ValueError(f"not an .npz archive ({err})") from None
    arrays = {}
    with archive:
        infos = archive.infolist()
        declared = sum(info.file_size for info in infos)
        if declared > _MAX_EXPANSION * max(size, 1):
            raise ValueError(f"the archive declares {declared} bytes of arrays in a file of {size} bytes")
        for info in infos:
            name = info.filename
            if not name.endswith(".npy") or name[:-4] in arrays:
                raise ValueError(f"entry {name!r} is not a single NumPy array (.npy) of the archive")
            key = name[:-4]
            stored = info.compress_type == zipfile.ZIP_STORED
            if (stored and info.file_size != info.compress_size) or \
                    info.file_size > _MAX_EXPANSION * max(info.compress_size, 1) + 1024:
                raise ValueError(f"entry {name!r} declares {info.file_size} bytes held in {info.compress_size}")
            arrays[key] = _read_member(archive, info, key in text_entries, max_text_chars)
    return arrays


def _read_member(archive, info, text: bool, max_text_chars: int) -> np.ndarray:
    name = info.filename
    try:
        with archive.open(info) as fh:
            shape, fortran, dtype = _member_header(fh, name)
            header_bytes = fh.tell()
            if dtype.hasobject:
                raise ValueError(f"entry {name!r} holds Python objects: a safe archive holds numbers only")
            if dtype.kind == "U" and not (text and shape == () and dtype.itemsize <= 4 * max_text_chars):
                raise ValueError(f"entry {name!r} holds text of dtype {dtype} and shape {shape}, where numbers belong")
            if dtype.kind not in "biufcU" or dtype.fields is not None or dtype.subdtype is not None:
                raise ValueError(f"entry {name!r} has the dtype {dtype}, not a plain numeric one")
            n_bytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if header_bytes + n_bytes != info.file_size:
                raise ValueError(f"entry {name!r} declares an array of shape {shape} and dtype {dtype} "
                                 f"({n_bytes} bytes) but holds {info.file_size - header_bytes} bytes")
            data = fh.read(n_bytes)
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError) as err:
        raise ValueError(f"entry {name!r} cannot be read ({err})") from None
    if len(data) != n_bytes:
        raise ValueError(f"entry {name!r} is truncated ({len(data)} of {n_bytes} bytes)")
    array = np.frombuffer(data, dtype=dtype)
    if fortran:
        return array.reshape(shape[::-1]).T.copy()
    return array.reshape(shape).copy()


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def loads_json(text: str, *, max_chars: int = 1_000_000, max_depth: int = 32):
    """``json.loads(text)`` for text of at most ``max_chars`` characters nested at most ``max_depth`` deep.

    Parameters
    ----------
    text : str
        The JSON text.
    max_chars : int
        Longest text accepted.
    max_depth : int
        Deepest nesting of arrays and objects accepted.

    Returns
    -------
    the parsed value

    Raises
    ------
    ValueError
        Too long, too deep, or not JSON.

    Examples
    --------
    >>> loads_json('{"a": [1, 2]}')
    {'a': [1, 2]}
    >>> loads_json("[" * 100 + "]" * 100)
    Traceback (most recent call last):
    ...
    ValueError: JSON nested 100 levels deep (at most 32 accepted)
    """
    if len(text) > max_chars:
        raise ValueError(f"JSON text of {len(text)} characters (at most {max_chars} accepted)")
    skeleton = np.frombuffer(_STRING.sub('""', text).encode("utf-8", "replace"), dtype=np.uint8)
    step = np.isin(skeleton, (ord("["), ord("{"))).astype(np.int64) - np.isin(skeleton, (ord("]"), ord("}")))
    depth = int(np.cumsum(step).max(initial=0))
    if depth > max_depth:
        raise ValueError(f"JSON nested {depth} levels deep (at most {max_depth} accepted)")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as err:
        raise ValueError(f"not valid JSON ({err})") from None
