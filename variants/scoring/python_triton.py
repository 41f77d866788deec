"""The scoring operation as one Triton kernel, written as the Triton tutorials write a row reduction: a program
per block of rows, the features walked in tiles, standardize -> clip -> weight -> row sum -> flag in registers,
the score and flag stored once; the flagged count by torch on the flags (a second, tiny kernel). Semantics as
kstudy's: the clip propagates NaN (tl.PropagateNan.ALL), so NaN in x gives a NaN score and flag 0; +-Inf clips.
The tile is chosen by the feature count, as the tutorials' heuristics do, not autotuned: every point of a study
then runs the same code its config reports."""

from kstudy_py.rungs import rung


@rung(operation="scoring", framework="triton", fusion="full", kernels=2,
      description="Triton: one fused kernel (a program per row block, features in tiles, score and flag), "
                  "then torch.count_nonzero on the flags")
def scoring_triton(triton):
    import torch
    import triton.language as tl

    @triton.jit
    def score_rows(x_ptr, mean_ptr, inv_std_ptr, weight_ptr, score_ptr, flag_ptr, rows, features, pitch, clip,
                   threshold, BLOCK_ROWS: tl.constexpr, BLOCK_FEATURES: tl.constexpr):
        r = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
        in_rows = r < rows
        row_start = r.to(tl.int64) * pitch
        acc = tl.zeros([BLOCK_ROWS], dtype=tl.float32)
        for f0 in range(0, features, BLOCK_FEATURES):
            f = f0 + tl.arange(0, BLOCK_FEATURES)
            in_features = f < features
            x = tl.load(x_ptr + row_start[:, None] + f[None, :], mask=in_rows[:, None] & in_features[None, :],
                        other=0.0)
            mean = tl.load(mean_ptr + f, mask=in_features, other=0.0)
            inv_std = tl.load(inv_std_ptr + f, mask=in_features, other=0.0)
            weight = tl.load(weight_ptr + f, mask=in_features, other=0.0)
            z = (x - mean[None, :]) * inv_std[None, :]
            z = tl.maximum(z, -clip, propagate_nan=tl.PropagateNan.ALL)
            z = tl.minimum(z, clip, propagate_nan=tl.PropagateNan.ALL)
            acc += tl.sum(z * weight[None, :], axis=1)
        tl.store(score_ptr + r, acc, mask=in_rows)
        tl.store(flag_ptr + r, (acc > threshold).to(tl.uint8), mask=in_rows)

    config = {}

    def run(x, mean, inv_std, weight, clip, threshold):
        rows, features = x.shape[0], mean.shape[0]
        block_features = min(triton.next_power_of_2(features), 128)
        block_rows = max(16, min(256, 4096 // block_features))  # ~4,096 elements a tile in flight per program
        warps = 4 if block_rows * block_features <= 4096 else 8
        config.update(block_rows=block_rows, block_features=block_features, num_warps=warps)
        score = torch.empty(rows, dtype=torch.float32, device=x.device)
        flag = torch.empty(rows, dtype=torch.uint8, device=x.device)
        grid = (triton.cdiv(rows, block_rows),)
        score_rows[grid](x, mean, inv_std, weight, score, flag, rows, features, x.stride(0), clip, threshold,
                         BLOCK_ROWS=block_rows, BLOCK_FEATURES=block_features, num_warps=warps)
        return score, flag, torch.count_nonzero(flag)

    run.kstudy_config = config
    return run
