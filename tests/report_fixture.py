"""Shared by the report checks that build archives here: the imports they need (exit 77, ctest's skip, when
this python lacks h5py, pandas, numpy or matplotlib), kstudy_py on the path, and the writing of tables as
kstudy writes them. Import it after `sys.dont_write_bytecode = True`, so that no __pycache__ is left in tests/."""
import sys
from pathlib import Path

try:
    import h5py
    import matplotlib  # noqa: F401  (the report needs it)
    import numpy as np
    import pandas as pd
except ImportError as error:
    print(f"skipped: {error}")
    sys.exit(77)

sys.dont_write_bytecode = True
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from kstudy_py import archive as A  # noqa: E402
from kstudy_py import report  # noqa: E402

__all__ = ["A", "ROOT", "check", "compound", "h5py", "np", "pd", "report", "write_tables"]


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def compound(columns):
    """A compound dataset's rows from {name: values}; strings stored variable-length, as kstudy writes them."""
    dtype = [(k, h5py.string_dtype() if isinstance(v[0], str) else np.asarray(v).dtype) for k, v in columns.items()]
    rows = np.empty(len(next(iter(columns.values()))), dtype=dtype)
    for k, v in columns.items():
        rows[k] = np.array(v, dtype=h5py.string_dtype()) if isinstance(v[0], str) else v
    return rows


def write_tables(group, tables):
    for name, df in tables.items():
        group.create_dataset(name, data=compound({c: df[c].tolist() for c in df.columns}))
