"""The scoring operation in NumPy: the first study's host baseline (seed 000's NumPy column), written as a NumPy user
writes it: one array expression per step, each leaving a rows x features temporary, and the row score as a
matrix-vector product (NumPy's BLAS). Semantics as kstudy's (variants/scoring/scoring_problem.hpp): NaN in x
propagates to the row's score, whose flag is then 0; +-Inf standardizes to +-clip.
"""

from kstudy_py.rungs import rung


@rung(operation="scoring", framework="numpy", fusion="none", kernels=5,
      description="NumPy: standardize, clip, weight as array expressions, score by x @ w (BLAS), flag")
def scoring_numpy(np):
    def run(x, mean, inv_std, weight, clip, threshold):
        z = np.clip((x - mean) * inv_std, -clip, clip)
        score = z @ weight
        flag = score > threshold
        return score, flag.view(np.uint8), np.count_nonzero(flag)

    return run
