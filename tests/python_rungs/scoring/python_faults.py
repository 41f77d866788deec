"""Python rungs that go wrong, each in one way a real one does, for ctest python_rungs (tests/check_python_rungs.sh):
the gate must reject the slightly wrong one, and each failure must be that rung's recorded failure at its point,
never the study's."""

import time

from kstudy_py.rungs import rung
from kstudy_py.rungs.frameworks import Framework, framework


def _scores(np, x, mean, inv_std, weight, clip):
    return np.clip((x - mean) * inv_std, -clip, clip) @ weight


@rung(operation="scoring", framework="numpy", description="correct, and prints to stdout on every call")
def scoring_test_noisy(np):
    def run(x, mean, inv_std, weight, clip, threshold):
        print("a rung that prints must not break the protocol")
        score = _scores(np, x, mean, inv_std, weight, clip)
        flag = score > threshold
        return score, flag, int(flag.sum())

    return run


@rung(operation="scoring", framework="numpy", description="scores rounded through float16: slightly wrong")
def scoring_test_half_scores(np):
    def run(x, mean, inv_std, weight, clip, threshold):
        score = _scores(np, x, mean, inv_std, weight, clip).astype(np.float16).astype(np.float32)
        flag = score > threshold
        return score, flag, int(flag.sum())

    return run


@rung(operation="scoring", framework="numpy", description="raises on every call")
def scoring_test_raises(np):
    def run(**arrays):
        raise ValueError("a deliberate failure of the test rung")

    return run


@rung(operation="scoring", framework="numpy", description="never answers")
def scoring_test_hangs(np):
    def run(**arrays):
        time.sleep(3600)

    return run


@rung(operation="scoring", framework="numpy", description="returns one score too few")
def scoring_test_short(np):
    def run(x, mean, inv_std, weight, clip, threshold):
        score = _scores(np, x, mean, inv_std, weight, clip)
        flag = score > threshold
        return score[:-1], flag, int(flag.sum())

    return run


@framework
class Missing(Framework):
    name = "kstudy_test_missing"
    module = "kstudy_test_no_such_module"


@rung(operation="scoring", framework="kstudy_test_missing", description="its framework is not installed")
def scoring_test_missing(module):
    return None
