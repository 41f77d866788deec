"""A rung of an operation that does not describe its arrays (operation::external_inputs): `kstudy list` says it is
not registered, and why, instead of the rung failing at every point."""

from kstudy_py.rungs import rung


@rung(operation="stream_triad", framework="numpy", description="its operation has no Python rungs")
def stream_triad_test_unsupported(np):
    def run(**arrays):
        raise AssertionError("never called: the rung is not registered")

    return run
