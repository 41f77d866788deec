"""A device framework's path through kstudy without a GPU, for ctest python_rungs: a CudaFramework whose "device" is
host memory and whose events read the host clock. What it checks is the worker's and kstudy's side of a GPU rung:
the device timers (resident_wall and device_events from the framework's own clocks), the one-shot upload into
arrays a framework cannot change in place (JAX's: copy_in returns a new array, which replaces the old), and a
configuration the rung chooses at its first call (Triton's tile), archived as the variant's tuned parameters."""

import time

from kstudy_py.rungs import rung
from kstudy_py.rungs.frameworks import CudaFramework, framework


class _HostClockEvent:
    def record(self):
        self.at = time.perf_counter()

    def synchronize(self):
        pass


class _Immutable:
    """An array that must be replaced, never written: what JAX's arrays are."""

    def __init__(self, values):
        self.values = values.copy()
        self.values.setflags(write=False)


@framework
class FakeDevice(CudaFramework):
    name = "kstudy_test_fake_device"
    module = "numpy"

    def no_device(self, module) -> str:
        return ""

    def own(self, host, dtype):
        return _Immutable(host)

    def copy_in(self, own, host):
        return _Immutable(host)

    def events(self):
        return _HostClockEvent(), _HostClockEvent()

    def elapsed_seconds(self, start, end) -> float:
        return end.at - start.at


@rung(operation="scoring", framework="kstudy_test_fake_device", fusion="full",
      description="NumPy behind a fake device framework: device timers, immutable inputs, a config at first call")
def scoring_test_fake_device(np):
    config = {}

    def run(x, mean, inv_std, weight, clip, threshold):
        config.setdefault("block_features", x.values.shape[1])
        score = np.clip((x.values - mean.values) * inv_std.values, -clip, clip) @ weight.values
        flag = score > threshold
        return score, flag.view(np.uint8), int(flag.sum())

    run.kstudy_config = config
    return run
