"""The scoring operation in CuPy, the first study's two CuPy columns (seed 000): composed CuPy, the NumPy code with
`cupy` for `numpy` (one kernel per array expression, each leaving a rows x features temporary in device memory),
and partial fusion, one ElementwiseKernel for standardize -> clip -> weight with the row sum and the threshold left
to CuPy. Semantics as kstudy's (variants/scoring/scoring_problem.hpp): NaN in x propagates to the row's score and
its flag is 0; +-Inf standardizes to +-clip (the kernel's clip keeps NaN: a comparison with NaN is false).
"""

from kstudy_py.rungs import rung


def _features(x, mean):
    # x is rows x pitch; a pitch wider than the features is padding (a view, no copy).
    return x[:, :mean.shape[0]] if x.shape[1] != mean.shape[0] else x


@rung(operation="scoring", framework="cupy", fusion="none", kernels=7,
      description="composed CuPy: the NumPy code on cupy arrays (subtract, multiply, clip, multiply, sum, compare, "
                  "count), a rows x features temporary per step")
def scoring_cupy(cp):
    def run(x, mean, inv_std, weight, clip, threshold):
        z = cp.clip((_features(x, mean) - mean) * inv_std, -clip, clip)
        score = (z * weight).sum(axis=1)
        flag = score > threshold
        return score, flag.view(cp.uint8), cp.count_nonzero(flag)

    return run


@rung(operation="scoring", framework="cupy", fusion="partial", kernels=4,
      description="partially fused CuPy: one ElementwiseKernel (standardize, clip, weight), then CuPy's row sum, "
                  "compare and count, as the seed's partial fusion")
def scoring_cupy_partial(cp):
    weigh = cp.ElementwiseKernel(
        "float32 x, float32 mean, float32 inv_std, float32 weight, float32 clip",
        "float32 out",
        """
        float z = (x - mean) * inv_std;
        z = z < -clip ? -clip : (z > clip ? clip : z);
        out = z * weight;
        """,
        "kstudy_scoring_weigh")

    def run(x, mean, inv_std, weight, clip, threshold):
        score = weigh(_features(x, mean), mean, inv_std, weight, cp.float32(clip)).sum(axis=1)
        flag = score > threshold
        return score, flag.view(cp.uint8), cp.count_nonzero(flag)

    return run
